import Downloader
import Foundation
import HTTPTestServer
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `dl`'s state, tried as issue #12 describes: two processes on one folder, a file named like the state, `kill -9`
/// during many small files, secrets, and what a successful run leaves behind.
@Suite("dl state")
final class DLStateTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var work: URL { workspace.directory }

    init() throws {
        workspace = try TestWorkspace(prefix: "dl-state")
    }

    var dir: URL { work.appendingPathComponent("out") }

    func md5(_ path: String) throws -> String {
        MD5.hash(data: try Data(contentsOf: URL(fileURLWithPath: path))).hexString
    }

    /// Everything in DIR, hidden entries included, as paths relative to it.
    func entries() -> [String] {
        (FileManager.default.enumerator(atPath: dir.path)?.allObjects as? [String] ?? []).sorted()
    }

    @Test("A second dl on the same directory says so and exits 1; with --wait it waits and then delivers")
    func secondProcess() async throws {
        // The second response (after the short first one) stalls for ten minutes, and the first dl's watchdog
        // waits as long: it surely holds the directory until it is interrupted, however loaded the machine.
        let slow = server.url("/bytes/shared?size=400000&stallAfter=100000&stall=600&stallCount=2")
        let first = try DLProcess(["--timeout", "600", "--dir", dir.path, slow.absoluteString], in: work)
        #expect(await server.waitUntil() { $0.bodyBytesSent >= 100_000 })
        let second = try await DLProcess.run(["--dir", dir.path, slow.absoluteString], in: work)
        #expect(second.status == 1)
        #expect(second.stderr.contains("another dl is using \(dir.path)"), "\(second.stderr)")
        #expect(second.stdout.isEmpty)

        let waiting = try DLProcess(["--wait", "--dir", dir.path, slow.absoluteString], in: work)
        #expect(await waiting.waitForStderr(containing: "waiting for it", timeout: .seconds(60)))
        first.send(SIGINT)  // the first suspends, saves and lets go; the waiting one resumes its bytes by Range
        let firstOutcome = await first.wait()
        let waitingOutcome = await waiting.wait()
        #expect(
            firstOutcome.status == 130 && waitingOutcome.status == 0, "\(firstOutcome.stderr) \(waitingOutcome.stderr)")
        #expect(waitingOutcome.lines == [dir.appendingPathComponent("shared").path])
        #expect(try md5(waitingOutcome.lines.first ?? "") == TestContent(name: "shared", size: 400_000).md5.hexString)
        #expect((server.requests.filter { $0.method == "GET" }.last?.rangeStart ?? 0) > 0, "resumed, not refetched")
        #expect(entries() == ["shared"])
    }

    @Test("--list shows the bytes on disk of a suspended 50 MiB download (issue #32: it showed 0)")
    func listShowsBytesOnDisk() async throws {
        let size = 50 << 20
        let url = server.url("/bytes/half?size=\(size)&stallAfter=\(1 << 20)&stall=60&stallCount=1&stallReached=1")
        let running = try DLProcess(["--dir", dir.path, url.absoluteString], in: work)
        #expect(await running.send(SIGINT, when: server) { $0.stallsBegun >= 1 })
        #expect(await running.wait().status == 130)
        let partial = try #require(
            (FileManager.default.enumerator(atPath: dir.appendingPathComponent(".dl").path)?.allObjects as? [String])?
                .first { $0.hasSuffix(".part") })
        let onDisk = try #require(
            FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent(".dl/\(partial)").path)[.size]
                as? Int)
        #expect(onDisk > 0)
        let list = try await DLProcess.run(["--list", "--dir", dir.path], in: work)
        #expect(list.status == 0)
        #expect(list.stdout.hasPrefix("suspended\t\(onDisk)/\(size)\t"), "\(list.stdout)")
    }

    @Test("Two dl processes with overlapping lists of small files: every printed path is verified, no (1) copies")
    func overlappingProcesses() async throws {
        let urls = (0..<120).map { server.url("/bytes/o\($0)?size=3000&rate=300000").absoluteString }
        let a = try DLProcess(["--wait", "--dir", dir.path] + Array(urls[0..<80]), in: work)
        let b = try DLProcess(["--wait", "--dir", dir.path] + Array(urls[40..<120]), in: work)
        let outcomes = [await a.wait(), await b.wait()]
        for outcome in outcomes {
            #expect(outcome.status == 0, "\(outcome.stderr)")
            for path in outcome.lines {
                let name = URL(fileURLWithPath: path).lastPathComponent
                #expect(try md5(path) == TestContent(name: name, size: 3000).md5.hexString)
            }
        }
        #expect(Set(outcomes[0].lines).count == 80 && Set(outcomes[1].lines).count == 80)
        #expect(entries().filter { !$0.hasPrefix(".dl") }.sorted() == (0..<120).map { "o\($0)" }.sorted())
    }

    @Test(
        "A downloaded file named like the state is just a file; the state survives it",
        arguments: ["receipts.json", ".dl"])
    func fileNamedLikeState(name: String) async throws {
        let encoded = name.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let planted = server.url("/bytes/planted?size=2000&filename=\(encoded)")
        let direct = server.url("/bytes/receipts.json?size=1500")
        // Above the small size (1 MiB): its bytes reach the partial file as they arrive, which the test waits for (a
        // small file is held in memory until its request ends or stops; issue #52).
        let other = server.url("/bytes/other?size=2000000&stallAfter=500&stall=300&stallCount=1")
        // A run that is interrupted keeps state; the planted files arrive meanwhile.
        let running = try DLProcess(
            ["--dir", dir.path, "-T", "300", other.absoluteString, planted.absoluteString, direct.absoluteString],
            in: work)
        // Interrupted once both planted files are delivered (printed) and the other has sent its first bytes.
        #expect(await running.waitForStdout(lines: 2))
        // Sent is not yet received: signalled once the other's first bytes are in its partial file (else the rerun
        // rightly starts it from byte 0; seen once on a loaded machine).
        #expect(await DLReliabilityTests.partialFile(in: dir, reaches: 500))
        running.send(SIGINT)
        let interrupted = await running.wait()
        #expect(interrupted.status == 130)
        #expect(interrupted.lines.count == 2, "both planted files were delivered: \(interrupted.stderr)")
        let delivered = Set(try interrupted.lines.map { try md5($0) })
        let expected = Set(
            [TestContent(name: "planted", size: 2000), TestContent(name: "receipts.json", size: 1500)].map(
                \.md5.hexString))
        #expect(delivered == expected)
        #expect(interrupted.lines.allSatisfy { !$0.contains("/.dl/") })
        let list = try await DLProcess.run(["--list", "--dir", dir.path], in: work)
        #expect(list.status == 0)
        #expect(list.stdout.contains(other.absoluteString), "the interrupted download is still known: \(list.stdout)")
        let rerun = try await DLProcess.run(["--dir", dir.path, other.absoluteString], in: work)
        #expect(rerun.status == 0, "\(rerun.stderr)")
        #expect(server.requests.filter { $0.path == "/bytes/other" && $0.method == "GET" }.last?.rangeStart == 500)
    }

    @Test("kill -9 at random moments during 1,000 small files, then a rerun: nothing finished is fetched again, no (1)")
    func killDuringManySmallFiles() async throws {
        let count = 1000
        // 50 ms each, 8 at a time: the last kill point leaves seconds of work, however slow the machine is to kill.
        let urls = (0..<count).map { server.url("/bytes/k\($0)?size=2000&rate=40000").absoluteString }
        var random = SeededGenerator(seed: 12)
        // Kill points inside the work (a run that finished everything would leave no state, by design). The kill is
        // sent by the server's own thread the moment the target request arrives: no scheduling delay in between.
        for range in [150..<250, 400..<500, 650..<750] {
            let target = Int.random(in: range, using: &random)
            let process = try DLProcess(["--quiet", "--max-active", "8", "--dir", dir.path] + urls, in: work)
            #expect(await process.send(SIGKILL, when: server) { $0.requests.count >= target })
            #expect(await process.wait().status == 128 + SIGKILL, "killed mid-run, not finished")
        }
        let finished = Set(entries().filter { !$0.hasPrefix(".") })
        let before = server.requests.count
        let rerun = try await DLProcess.run(["--quiet", "--max-active", "8", "--dir", dir.path] + urls, in: work)
        #expect(rerun.status == 0, "\(rerun.stderr)")
        #expect(rerun.lines.count == count)
        let files = entries().filter { !$0.hasPrefix(".") }
        #expect(files.count == count, "no (1) copies: \(files.filter { $0.contains("(") }.prefix(5))")
        let refetched = server.requests.dropFirst(before).filter {
            $0.method == "GET" && finished.contains(String($0.path.dropFirst("/bytes/".count)))
        }
        #expect(
            refetched.isEmpty, "files finished before a kill were fetched again: \(refetched.prefix(5).map(\.path))")
        for path in rerun.lines.prefix(50) {
            let name = URL(fileURLWithPath: path).lastPathComponent
            #expect(try md5(path) == TestContent(name: name, size: 2000).md5.hexString)
        }
    }

    @Test(
        "A rerun's command line wins for tuning: --limit-rate dropped runs unpaced; --list shows what holds (issue #48)"
    )
    func rerunTuningWins() async throws {
        let url = server.url("/bytes/paced?size=\(3 << 20)").absoluteString
        let checksum = "md5=\(MD5.hash(data: TestContent(name: "paced", size: 3 << 20).data).hexString)"
        let first = try DLProcess(
            ["-q", "--dir", dir.path, "--limit-rate", "200k", "--checksum", checksum, url], in: work)
        #expect(await first.send(SIGTERM, when: server) { $0.bodyBytesSent >= 300_000 })
        #expect(await first.wait().status == 143)
        let listed = try await DLProcess.run(["--list", "--dir", dir.path], in: work)
        #expect(listed.stdout.contains("--limit-rate 200.0 KiB/s"), "\(listed.stdout)")
        #expect(listed.stdout.contains(checksum), "the expectation in force: \(listed.stdout)")
        let before = server.requests.count
        let rerun = try await DLProcess.run(["-q", "--dir", dir.path, url], in: work)
        #expect(rerun.status == 0, "\(rerun.stderr)")
        // Paced, the rest comes in windows of a quarter of a second at 200 KiB/s (over 50 requests); unpaced, in a
        // few.
        let gets = server.requests[before...].filter { $0.method == "GET" }.count
        #expect(gets <= 4, "\(gets) requests: still paced")
    }

    @Test("Words (issue #48): -o NAME in progress and warnings, --list shows a known length after kill -9")
    func words() async throws {
        // A retry's message names the file as -o names it, not after the URL.
        let flaky = server.url("/bytes/wire-name?size=3000&status=503&statusCount=1&retryAfter=0")
        let retried = try await DLProcess.run(["--dir", dir.path, "-o", "chosen.bin", flaky.absoluteString], in: work)
        #expect(retried.status == 0, "\(retried.stderr)")
        #expect(retried.stderr.contains("dl: chosen.bin: "), "\(retried.stderr)")
        #expect(!retried.stderr.contains("wire-name"), "\(retried.stderr)")
        // After kill -9 the journal may not have the length yet; the partial file's state has it.
        let size = 8 << 20
        let held = server.url("/bytes/known?size=\(size)&stallAfter=\(1 << 20)&stall=60&stallCount=1&stallReached=1")
        let killed = try DLProcess(["-q", "--dir", dir.path, held.absoluteString], in: work)
        #expect(await DLReliabilityTests.partialFile(in: dir, reaches: 1 << 20))
        killed.send(SIGKILL)
        _ = await killed.wait()
        let list = try await DLProcess.run(["--list", "--dir", dir.path], in: work)
        #expect(list.stdout.contains("/\(size)\t"), "\(list.stdout)")
    }

    @Test("A successful run leaves only the downloaded files in DIR, like wget and aria2c")
    func nothingLeftBehind() async throws {
        let outcome = try await DLProcess.run(
            [
                "--dir", dir.path, server.url("/bytes/a?size=1000").absoluteString,
                server.url("/bytes/b?size=2000").absoluteString,
            ],
            in: work)
        #expect(outcome.status == 0)
        #expect(entries() == ["a", "b"])
    }

    @Test("Credentials in URLs never appear in messages or --list")
    func redaction() async throws {
        let port = server.port
        let secret = "http://alice:s3cret@127.0.0.1:\(port)/status/404"
        let failed = try await DLProcess.run(["--dir", dir.path, "--retries", "0", secret], in: work)
        #expect(failed.status == 1)
        #expect(!failed.stderr.contains("s3cret") && failed.stderr.contains("alice:***@"), "\(failed.stderr)")
        let stalled =
            "http://bob:hunter2@127.0.0.1:\(port)/bytes/cred?size=100000&stallAfter=1000&stall=60&stallCount=1"
        let running = try DLProcess(["--dir", dir.path, stalled], in: work)
        #expect(await running.send(SIGTERM, when: server) { $0.bodyBytesSent >= 1000 })
        _ = await running.wait()
        let list = try await DLProcess.run(["--list", "--dir", dir.path], in: work)
        // Never saved: the listing has the URL without them, and says a rerun must give them again (issue #36).
        #expect(!list.stdout.contains("bob") && !list.stdout.contains("hunter2"), "\(list.stdout)")
        #expect(list.stdout.contains("credentials are not saved"), "\(list.stdout)")
    }
}
