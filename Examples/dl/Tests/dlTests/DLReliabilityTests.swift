import Downloader
import Foundation
import HTTPTestServer
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

@Suite("dl reliability")
final class DLReliabilityTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var work: URL { workspace.directory }

    init() throws {
        workspace = try TestWorkspace(prefix: "dl-reliability")
    }

    var dir: URL { work.appendingPathComponent("out") }

    @Test("dl stopped (SIGSTOP, Ctrl-Z) for longer than --timeout and continued: the stop is not a stall, no retry")
    func stoppedProcessIsNoStall() async throws {
        // The body pauses 9 s after 100,000 bytes; dl is stopped for 8 s of it, from the pause's first moment. The
        // watchdog, overdue when dl continues, used to judge the 8 s it could not watch: "no data for 4 s", a retry
        // (a CI machine that froze dl for 30 s cost a signed link its only GET this way).
        let url = server.url("/bytes/frozen?size=400000&stallAfter=100000&stall=9&stallCount=1&stallReached=1")
        let running = try DLProcess(["-T", "4", "--dir", dir.path, url.absoluteString], in: work)
        #expect(await running.send(SIGSTOP, when: server) { $0.stallsBegun >= 1 })
        try await Task.sleep(for: .seconds(8))  // the scenario's length, not a wait for an event
        running.send(SIGCONT)
        let outcome = await running.wait()
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(!outcome.stderr.contains("no data"), "\(outcome.stderr)")
        let gets = server.statistics.requests(path: "/bytes/frozen").filter { $0.method == "GET" }
        #expect(gets.count == 2, "the first 16 KiB, then the rest in one request: \(gets.map(\.range))")
        let file = URL(fileURLWithPath: outcome.lines.first ?? "")
        #expect(MD5.hash(data: try Data(contentsOf: file)) == TestContent(name: "frozen", size: 400_000).md5)
    }

    @Test("A signal during a body the server cannot resume says so on stop and in --list (issue #33)")
    func unresumableStopSaysSo() async throws {
        let url = server.url("/bytes/whole?size=\(64 << 20)&length=none&norange=1&stallAfter=\(1 << 20)&stall=60")
        let running = try DLProcess(["--dir", dir.path, url.absoluteString], in: work)
        #expect(await server.waitUntil { $0.stallsBegun >= 1 })
        // Signalled once the bytes before the pause are on disk (on a loaded machine they may still be on their way).
        #expect(await Self.partialFile(in: dir, reaches: 1 << 20))
        running.send(SIGTERM)
        let stopped = await running.wait()
        #expect(stopped.status == 143)
        #expect(stopped.stderr.contains("whole cannot be resumed"), "\(stopped.stderr)")
        let list = try await DLProcess.run(["--list", "--dir", dir.path], in: work)
        #expect(list.stdout.contains("(not resumable"), "\(list.stdout)")
        // A body with Range and a validator is resumable, and said to be nothing else.
        let ranged = server.url(
            "/bytes/ranged?size=\(64 << 20)&stallAfter=\(1 << 20)&stall=60&stallCount=1&stallReached=1")
        let other = try DLProcess(["--dir", dir.path, ranged.absoluteString], in: work)
        #expect(await other.send(SIGTERM, when: server) { $0.stallsBegun >= 2 })
        let second = await other.wait()
        #expect(second.status == 143 && !second.stderr.contains("ranged cannot"), "\(second.stderr)")
    }

    /// Waits (with a deadline) until a partial file in DIR's state has `length` bytes.
    ///
    /// 60 s, as the other waits on a child's progress: a CI machine once stalled every file sync for about a minute
    /// (all of `dl`'s tests finished within the same five seconds after it), and this wait had given up at 30 s.
    static func partialFile(in dir: URL, reaches length: Int, timeout: Duration = .seconds(60)) async -> Bool {
        let partial = dir.appendingPathComponent(".dl/partial")
        func reached() -> Bool {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: partial.path)) ?? []
            return names.contains { name in
                guard name.hasSuffix(".part") else { return false }
                let attributes = try? FileManager.default.attributesOfItem(
                    atPath: partial.appendingPathComponent(name).path)
                return ((attributes?[.size] as? NSNumber)?.intValue ?? 0) >= length
            }
        }
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if reached() { return true }
            try? await Task.sleep(for: .milliseconds(10))  // polling an event with a deadline, not a delay
        }
        // Once more: a wake-up that came after the deadline (a stalled machine) must not miss what arrived meanwhile.
        return reached()
    }

    @Test("A connection closed before any response fails or crashes the first run (corelibs #5285); a rerun recovers")
    func closedBeforeAnyResponse() async throws {
        let url = server.url("/bytes/cbr?size=200000&closeBeforeResponse=1")
        let first = try await DLProcess.run(["--dir", dir.path, url.absoluteString], in: work)
        // Swift before 6.4 may fatalError inside FoundationNetworking (a signal, status > 128); a fixed toolchain
        // retries the lost connection and succeeds, or reports it (status 1). Never a wrong file.
        #expect(first.status == 0 || first.status == 1 || first.status > 128, "status \(first.status): \(first.stderr)")
        if first.status == 1 { #expect(first.stderr.contains("dl: \(url.absoluteString): ")) }
        let second = try await DLProcess.run(["--dir", dir.path, url.absoluteString], in: work)
        #expect(second.status == 0, "\(second.stderr)")
        let file = try #require(second.lines.first)
        #expect(
            MD5.hash(data: try Data(contentsOf: URL(fileURLWithPath: file)))
                == TestContent(name: "cbr", size: 200_000).md5)
    }

    @Test(
        "Response headers without a space after the colon (corelibs #5527) end verified or as a clear error, never a wrong file"
    )
    func headersWithoutSpace() async throws {
        let url = server.url("/bytes/nospace?size=100000&nospace=1")
        let outcome = try await DLProcess.run(["--dir", dir.path, "--retries", "1", url.absoluteString], in: work)
        if outcome.status == 0 {
            let file = try #require(outcome.lines.first)
            #expect(
                MD5.hash(data: try Data(contentsOf: URL(fileURLWithPath: file)))
                    == TestContent(name: "nospace", size: 100_000).md5)
        } else {
            #expect(outcome.status == 1, "status \(outcome.status): \(outcome.stderr)")
            #expect(outcome.stderr.contains("dl: \(url.absoluteString): "))
            #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("nospace").path))
        }
    }

    @Test(
        "A large file without a strong ETag, or with ETags that flap, downloads in constant memory",
        .enabled(if: DLChaosTests.enabled), arguments: ["etag=none", "etag=flap"])
    func constantMemoryWithoutETag(options: String) async throws {
        // Chaos trial 18 of seed 1 (CI, stop 60): flapping ETags peaked at 113 MB; without an ETag 128 MiB peaked at
        // 127 MB against 40 MB with one (the continuity check's recent bytes kept the whole buffer they were cut
        // from). Against the release dl, as the chaos run: the bound is the product's, 96 MB.
        let size = 128 << 20
        let name = "const-\(options.dropFirst(5))"
        let process = try DLProcess(
            ["-q", "-x", "1", "--dir", dir.path, server.url("/bytes/\(name)?size=\(size)&\(options)").absoluteString],
            in: work)
        let peak = PeakMemory(pid: process.pid)
        let outcome = await process.wait()
        let peakBytes = peak.stop()
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(peakBytes <= 96 << 20, "peak RSS \(peakBytes >> 20) MB")
        let file = dir.appendingPathComponent(name)
        #expect(MD5.hash(data: try Data(contentsOf: file)) == TestContent(name: name, size: size).md5)
    }

    @Test(
        "Killed by SIGKILL mid-transfer again and again, dl still ends with every file verified and little fetched twice"
    )
    func crashLoop() async throws {
        let kills = 4
        let size = 600_000
        var random = SeededGenerator(seed: 7)
        // Each file's response stalls once per run, after a seeded random number of bytes, and each kill waits until
        // all ten have stalled: every kill lands while all ten transfers are mid-way, whatever the machine's load;
        // after `kills` runs no stall is left. A run's short first request (16 KiB, before any stall) is not counted
        // (`stallReached`): counted, it used up the stalls after two runs, and the later kills landed wherever whole
        // files were streaming. The stall outlasts dl's timeout (`-T 900`): under CI's load the ten stalls once began
        // more than dl's default 30 s apart, dl retried the first ones, each retry spent a stall, and the last run had
        // too few left (stop 60: "kill 3", dl ended with every file).
        let stalls = (0..<10).map { _ in Int.random(in: 20_000...100_000, using: &random) }
        let names = (0..<10).map { "loop\($0)" }
        let urls = zip(names, stalls).map { name, stall in
            server.url("/bytes/\(name)?size=\(size)&stallAfter=\(stall)&stall=600&stallCount=\(kills)&stallReached=1")
                .absoluteString
        }
        for kill in 0..<kills {
            let before = server.statistics.stallsBegun
            let process = try DLProcess(
                ["--dir", dir.path, "--quiet", "-T", "900", "--max-active", "10"] + urls, in: work)
            #expect(
                await process.send(SIGKILL, when: server, timeout: .seconds(240)) {
                    $0.stallsBegun >= before + names.count
                }, "kill \(kill)")
            let outcome = await process.wait()
            #expect(outcome.status == 128 + SIGKILL)
            let list = try await DLProcess.run(["--list", "--dir", dir.path], in: work)
            #expect(list.status == 0, "receipts load after kill \(kill): \(list.stderr)")
        }
        let last = try await DLProcess.run(["--dir", dir.path, "--quiet", "--max-active", "10"] + urls, in: work)
        #expect(last.status == 0, "\(last.stderr)")
        #expect(last.lines.count == names.count)
        for name in names {
            let file = dir.appendingPathComponent(name)
            #expect(MD5.hash(data: try Data(contentsOf: file)) == TestContent(name: name, size: size).md5, "\(name)")
        }
        // A kill loses at most what sat unread in socket buffers; everything written was resumed by Range.
        let total = Int64(names.count * size)
        #expect(server.statistics.bodyBytesSent <= total + Int64(kills * 10 * 256 * 1024))
        let leftovers =
            (try? FileManager.default.contentsOfDirectory(atPath: dir.appendingPathComponent(".dl/partial").path)) ?? []
        #expect(leftovers.isEmpty, "no partial files left: \(leftovers)")
    }
}
