import Downloader
import Foundation
import HTTPTestServer
import Testing

/// Rates measured against the clock. They need the machine to themselves — in the full suite, the test process's
/// busy threads take most of the CPU from a `dl` child (the scheduler is fair per thread) — so they run only when
/// `DOWNLOADER_TIMING_TESTS=1`, which `.ci/run` sets for a run of this suite alone (`--filter DLTimingTests`).
@Suite(
    "dl timing (alone)",
    .enabled(if: ProcessInfo.processInfo.environment["DOWNLOADER_TIMING_TESTS"] == "1"))
final class DLTimingTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var work: URL { workspace.directory }

    init() throws {
        workspace = try TestWorkspace(prefix: "dl-timing")
    }

    /// Runs `dl` and returns its outcome and the bytes per second it achieved for `bytes`.
    func measure(_ arguments: [String], bytes: Int) async throws -> (DLProcess.Outcome, Double) {
        let clock = ContinuousClock()
        let began = clock.now
        let outcome = try await DLProcess.run(arguments, in: work)
        return (outcome, Double(bytes) / ((clock.now - began) / .seconds(1)))
    }

    @Test("--limit-rate 1M keeps one 3 MiB download within 20 % of 1 MiB/s")
    func limitRate() async throws {
        let url = server.url("/bytes/slow?size=\(3 << 20)")
        let (outcome, rate) = try await measure(
            ["--dir", "out", "--limit-rate", "1M", url.absoluteString], bytes: 3 << 20)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(abs(rate / Double(1 << 20) - 1) <= 0.2, "\(Int(rate)) bytes/s")
    }

    @Test("--max-overall-limit 1M keeps two downloads together within 20 % of 1 MiB/s")
    func overallLimit() async throws {
        let urls = (0..<2).map { server.url("/bytes/all\($0)?size=\(3 << 19)").absoluteString }
        let (outcome, rate) = try await measure(["--dir", "out", "--max-overall-limit", "1M"] + urls, bytes: 3 << 20)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(abs(rate / Double(1 << 20) - 1) <= 0.2, "\(Int(rate)) bytes/s")
    }
}
