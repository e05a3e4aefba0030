import Downloader
import Foundation
import HTTPTestServer
import Testing

@testable import dl

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Rates and reaction times measured against the clock. They need the machine to themselves — in the full suite, the test process's
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

    @Test(
        "A signal during a fast body the server cannot resume ends dl within 5 s, and its worthless bytes are not kept (issue #48)"
    )
    func signalOnFastUnresumableBody() async throws {
        // Here, alone: its bound is a time, and its endless fast bodies take both cores from the rest of the suite (the
        // dl tests waiting on stalls behind it missed their moment on a loaded CI machine).
        // An endless body written as fast as the socket takes it: more than URLSession hands over, so libcurl's queue
        // is never idle, and a cancel waited for it for up to 115 s. One trial at a time: three at once on two cores
        // leave the disk behind, which ends the download (documented) before any signal.
        var signalled = 0
        for (signal, mebibytes) in [(SIGTERM, 64), (SIGINT, 256), (SIGHUP, 512)] {
            signalled += try await signalFastBody(signal, after: Int64(mebibytes) << 20) ? 1 : 0
        }
        #expect(signalled > 0, "every trial ended before its signal")
    }

    /// One trial of `signalOnFastUnresumableBody`.
    /// - Returns: whether the signal was sent (`false`: dl stopped before, as documented, when the disk fell behind).
    func signalFastBody(_ signal: Int32, after bytes: Int64) async throws -> Bool {
        let url = server.url("/bytes/fast\(signal)?size=\(1 << 40)&length=none&norange=1&fast=1")
        let dir = work.appendingPathComponent("fast\(signal)")
        let running = try DLProcess(["-q", "--dir", dir.path, url.absoluteString], in: work)
        let signalled = Locked<ContinuousClock.Instant?>(nil)
        let before = server.statistics.bodyBytesSent
        let sent = await server.waitUntil(timeout: .seconds(60)) { statistics in
            guard running.isRunning else { return true }
            guard statistics.bodyBytesSent - before >= bytes else { return false }
            signalled.withLock { $0 = .now }
            running.send(signal)
            return true
        }
        let stopped = await running.wait()
        guard sent, let at = signalled.withLock({ $0 }) else {
            #expect(stopped.stderr.contains("the disk fell"), "\(stopped.stderr)")
            return false
        }
        let took = (running.exitInstant ?? .now) - at
        #expect(stopped.status == 128 + signal, "\(stopped.stderr)")
        #expect(took < .seconds(5), "dl ended \(took) after signal \(signal)")
        // Nothing worth keeping: no bytes kept (nor synced) for a rerun that fetches the body again anyway.
        let partial = dir.appendingPathComponent(".dl/partial")
        let kept = ((try? FileManager.default.contentsOfDirectory(atPath: partial.path)) ?? []).filter {
            $0.hasSuffix(".part")
        }.map { name in
            let attributes = try? FileManager.default.attributesOfItem(
                atPath: partial.appendingPathComponent(name).path)
            return (attributes?[.size] as? NSNumber)?.intValue ?? 0
        }
        #expect(kept.allSatisfy { $0 == 0 }, "kept \(kept)")
        let list = try await DLProcess.run(["--list", "--dir", dir.path], in: work)
        #expect(list.stdout.contains("(not resumable"), "\(list.stdout)")
        return true
    }
}
