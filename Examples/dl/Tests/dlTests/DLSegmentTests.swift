import Downloader
import Foundation
import HTTPTestServer
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `dl -x N`: several connections per file, run as a user runs it.
@Suite("dl segments")
final class DLSegmentTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var work: URL { workspace.directory }
    var dir: URL { work.appendingPathComponent("out") }

    init() throws {
        workspace = try TestWorkspace(prefix: "dl-segments")
    }

    @Test("dl -x 4 uses four connections (the server holds each segment until all four have arrived)")
    func fourConnections() async throws {
        let size = 20 << 20
        let url = server.url("/bytes/x4?size=\(size)&gate=x4&gateSize=4&gateFrom=16384")
        let outcome = try await DLProcess.run(["--dir", dir.path, "--quiet", "-x4", url.absoluteString], in: work)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        let x4 = try await TestContent.md5(ofFile: dir.appendingPathComponent("x4"))
        #expect(await x4 == TestContent(name: "x4", size: size).md5OffThePool)
        #expect(server.statistics.peakActiveRequests >= 4)
    }

    /// The bytes the saved state of the one download in `dir` lists: the hashed ones and the segments after them.
    func listedBytes() -> Int? {
        let partial = dir.appendingPathComponent(".dl/partial")
        guard
            let name = try? FileManager.default.contentsOfDirectory(atPath: partial.path).first(where: {
                $0.hasSuffix(".state")
            }),
            let data = try? Data(contentsOf: partial.appendingPathComponent(name)),
            let saved = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let state = saved["state"] as? [String: Any],  // beside its checksum
            let hashed = state["hashedLength"] as? Int
        else { return nil }
        let segments = state["segments"] as? [[Int]] ?? []
        return hashed + segments.reduce(0) { $0 + $1[1] - $1[0] }
    }

    @Test("dl -x 4 killed mid-way: the rerun fetches exactly what the saved state does not list, and verifies")
    func killMidwayAndResume() async throws {
        let size = 48 << 20
        // Each of the first five GETs (the short first request, then one 4 MiB window per connection) stops for ten
        // minutes after 2 MiB, and dl waits longer before a retry (with its default 30 s a loaded machine reached the
        // end first): the download holds still mid-way, whatever the machine's load, until it is killed.
        let url = server.url("/bytes/xkill?size=\(size)&stallAfter=\(2 << 20)&stall=600&stallCount=5").absoluteString
        let process = try DLProcess(["--dir", dir.path, "--quiet", "--timeout", "900", "-x", "4", url], in: work)
        // Killed once the saved state lists 6 MiB of the 8 written (a deadline, not a delay).
        let deadline = ContinuousClock.now + .seconds(180)
        while (listedBytes() ?? 0) < 6 << 20 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        process.send(SIGKILL)
        let killed = await process.wait()
        #expect(killed.status == 128 + SIGKILL)
        #expect(server.statistics.peakActiveRequests >= 2, "segments were in use when killed")
        let listed = try #require(listedBytes())
        #expect(listed >= 6 << 20 && listed < size)
        let before = server.statistics.bodyBytesSent
        let rerun = try await DLProcess.run(["--dir", dir.path, "--quiet", "-x", "4", url], in: work)
        #expect(rerun.status == 0, "\(rerun.stderr)")
        let file = dir.appendingPathComponent("xkill")
        let xkill = try await TestContent.md5(ofFile: file)
        #expect(await xkill == TestContent(name: "xkill", size: size).md5OffThePool)
        // The rerun asks only for what the state does not list. (What a kill loses on top of that is what sat in
        // socket buffers and memory plus at most 1 MiB not yet listed: 0.1-0.3 % of this file on an idle machine,
        // more when a loaded machine lets the buffers fill; BENCHMARKS.md measures it.)
        let rerunServed = server.statistics.bodyBytesSent - before
        #expect(rerunServed == Int64(size - listed), "the rerun fetched \(rerunServed), \(size - listed) were missing")
    }

    @Test("-x takes 1 to 16; -s and --split mean the same")
    func flagValues() async throws {
        for arguments in [["-x", "0"], ["-x17"], ["-s", "many"], ["--max-connection-per-server="]] {
            let outcome = try await DLProcess.run(arguments + ["http://127.0.0.1:1/x"], in: work)
            #expect(outcome.status == 2, "\(arguments): \(outcome.stderr)")
        }
        let url = server.url("/bytes/split?size=100000").absoluteString
        let outcome = try await DLProcess.run(["--dir", dir.path, "--quiet", "--split", "3", url], in: work)
        #expect(outcome.status == 0, "\(outcome.stderr)")
    }
}
