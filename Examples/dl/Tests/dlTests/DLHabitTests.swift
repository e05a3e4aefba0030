import Downloader
import Foundation
import HTTPTestServer
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Issue #26: the habits of wget, curl and aria2c users — where files land, their flags, their typos — each run
/// through the built `dl`.
@Suite("dl habits")
final class DLHabitTests: Sendable, DLFileChecks {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var work: URL { workspace.directory }

    init() throws {
        workspace = try TestWorkspace(prefix: "dl-habits")
    }

    @Test("dl URL saves to the current directory, as wget, curl -O and aria2c do, and leaves only the file")
    func currentDirectory() async throws {
        let outcome = try await DLProcess.run(["-q", server.url("/bytes/here.bin?size=5000").absoluteString], in: work)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(outcome.lines == [work.appendingPathComponent("here.bin").standardizedFileURL.path])
        #expect(try md5(work.appendingPathComponent("here.bin")) == content("here.bin", 5000))
        #expect(entries(work) == ["here.bin"], "no ./downloads, no .dl left")
    }

    @Test("-d and -dDIR are --dir; -o NAME names the one file inside it; -j, -H, -U, -T are --max-active, --header, …")
    func shortFlags() async throws {
        let a = server.url("/bytes/da?size=1000")
        let b = server.url("/bytes/db?size=1000")
        let first = try await DLProcess.run(
            ["-d", "d1", "-o", "named.bin", "-H", "X-Team: blue", a.absoluteString], in: work)
        let second = try await DLProcess.run(
            ["-dd2", "-j1", "-H", "X-Team: red", "-U", "agent/2", "-T", "20", b.absoluteString], in: work)
        #expect(first.status == 0 && second.status == 0, "\(first.stderr)\(second.stderr)")
        #expect(first.lines == [work.appendingPathComponent("d1/named.bin").standardizedFileURL.path])
        #expect(second.lines == [work.appendingPathComponent("d2/db").standardizedFileURL.path])
        let teams = server.requests.map { "\($0.path) \($0.value(forHeader: "X-Team") ?? "-")" }
        #expect(teams.contains("/bytes/da blue") && teams.contains("/bytes/db red"), "\(teams)")
        #expect(
            server.requests.filter { $0.path == "/bytes/db" }.allSatisfy {
                $0.value(forHeader: "User-Agent") == "agent/2"
            })
        let two = try await DLProcess.run(["-o", "x", a.absoluteString, b.absoluteString], in: work)
        #expect(two.status == 2 && two.stderr.contains("single URL"))
        let outside = try await DLProcess.run(["-o", "../x", a.absoluteString], in: work)
        #expect(outside.status == 2 && outside.stderr.contains("inside the folder"))
    }

    @Test("-t/--tries counts attempts as wget does; 0 means no limit")
    func tries() async throws {
        // Each of the first two GETs loses its connection after 1000 bytes.
        let once = server.url("/bytes/t1?size=100000&drop=1000&dropCount=2")
        let failed = try await DLProcess.run(["-d", "t", "-t", "2", once.absoluteString], in: work)
        #expect(failed.status == 1, "two attempts, both dropped: \(failed.stderr)")
        #expect(server.requests.filter { $0.path == "/bytes/t1" && $0.method == "GET" }.count == 2)
        let unlimited = server.url("/bytes/t0?size=100000&drop=1000&dropCount=2")
        let succeeded = try await DLProcess.run(["-d", "t", "--tries=0", unlimited.absoluteString], in: work)
        #expect(succeeded.status == 0, "\(succeeded.stderr)")
        #expect(try md5(work.appendingPathComponent("t/t0")) == content("t0", 100_000))
    }

    @Test("A mistyped flag gets a suggestion; -s without a number says what it is; every flag is in --help")
    func typosAndHelp() async throws {
        let typo = try await DLProcess.run(["--limt-rate", "1M", "http://127.0.0.1:1/a"], in: work)
        #expect(typo.status == 2 && typo.stderr.contains("Did you mean '--limit-rate'?"), "\(typo.stderr)")
        let far = try await DLProcess.run(["--frobnicate", "http://127.0.0.1:1/a"], in: work)
        #expect(far.status == 2 && !far.stderr.contains("Did you mean"), "\(far.stderr)")
        let silent = try await DLProcess.run(["-s", "http://127.0.0.1:1/a"], in: work)
        #expect(silent.status == 2 && silent.stderr.contains("-s is aria2c's --split"), "\(silent.stderr)")
        #expect(silent.stderr.contains("for quiet use -q"))
        let help = try await DLProcess.run(["--help"], in: work)
        for flag in [
            "-d, --dir", "-o, --out", "-j, --max-active", "-H, --header", "-U, --user-agent", "-t, --tries",
            "-T, --timeout", "--retries", "--directory-prefix", "--output-document", "--max-concurrent-downloads",
            "--max-overall-download-limit", "--split", "-O -",
        ] {
            #expect(help.stdout.contains(flag), "\(flag) is missing from --help")
        }
    }

    @Test("A fresh download is one request by default; DL_FIRST_REQUEST_CUT=0 asks 16 KiB first, then the rest")
    func firstRequest() async throws {
        let whole = server.url("/bytes/one.bin?size=200000")
        let short = server.url("/bytes/two.bin?size=200000")
        #expect(
            try await DLProcess.run(["-q", whole.absoluteString], in: work, environment: ["DL_FIRST_REQUEST_CUT": ""])
                .status == 0)
        #expect(
            try await DLProcess.run(["-q", short.absoluteString], in: work, environment: ["DL_FIRST_REQUEST_CUT": "0"])
                .status == 0)
        let ranges = { (path: String) in self.server.requests.filter { $0.path == path }.map(\.range) }
        #expect(ranges("/bytes/one.bin") == ["bytes=0-8388607"])
        #expect(ranges("/bytes/two.bin") == ["bytes=0-16383", "bytes=16384-199999"])
        #expect(try md5(work.appendingPathComponent("one.bin")) == content("one.bin", 200_000))
    }

    @Test("-O - streams the verified file to stdout; a wrong digest exits 1 saying the bytes were already written")
    func standardOutput() async throws {
        // At 2 MB/s the file takes 1.5 s: its bytes reach stdout while it downloads, before the digest is known.
        let url = server.url("/bytes/piped.tar?size=3000000&rate=2000000")
        // dl's default first request (a whole window, cut short when slow: at 2 MB/s it is cut, and the file
        // continues on a new connection while the stream follows it).
        let production = ["DL_FIRST_REQUEST_CUT": "1"]
        let outcome = try await DLProcess.run(["-O", "-", url.absoluteString], in: work, environment: production)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(outcome.stdoutData.count == 3_000_000)
        #expect(MD5.hash(data: outcome.stdoutData).hexString == content("piped.tar", 3_000_000))
        #expect(entries(work).isEmpty, "no file, no state")
        let wrong = try await DLProcess.run(
            ["-O", "-", "--md5", String(repeating: "0", count: 32), url.absoluteString], in: work,
            environment: production)
        #expect(wrong.status == 1 && wrong.stderr.contains("expected 000000"), "\(wrong.stderr)")
        // Whatever reached stdout before the digest was known is announced, by its count, as not to be used (under a
        // heavy load the download can end before dl copied anything: then there is nothing to announce).
        if !wrong.stdoutData.isEmpty {
            #expect(
                wrong.stderr.contains("\(wrong.stdoutData.count) bytes were already written to stdout"),
                "\(wrong.stderr)")
        }
    }

    @Test("--list reads the state while another dl runs, shows names, and says when nothing is unfinished")
    func listing() async throws {
        // Every response stalls after 1 MB of body, longer than any deadline here, and dl waits longer still before a
        // retry (its default 30 s let a loaded machine finish the download before the test looked): the download
        // runs until it is stopped.
        let url = server.url("/bytes/listed.iso?size=3000000&stallAfter=1000000&stall=600")
        let running = try DLProcess(["-d", "l", "--timeout", "900", url.absoluteString], in: work)
        let journal = work.appendingPathComponent("l/.dl/journal")
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline,
            !((try? String(contentsOf: journal, encoding: .utf8))?.contains("downloading") ?? false)
        {
            try await Task.sleep(for: .milliseconds(20))
        }
        let during = try await DLProcess.run(["--list", "-d", "l"], in: work)
        let saved = (try? String(contentsOf: journal, encoding: .utf8)) ?? "no journal"
        #expect(
            during.status == 0 && during.stdout.hasPrefix("downloading\t"),
            "\(during.stdout)\(during.stderr) journal: \(saved) locks: \(Platform.lockTable)"
        )
        #expect(during.stdout.contains("\tlisted.iso\t"), "the file's name, not a key: \(during.stdout)")
        running.send(SIGTERM)
        #expect(await running.wait().status == 143)
        let after = try await DLProcess.run(["--list", "-d", "l"], in: work)
        #expect(after.stdout.hasPrefix("suspended\t") && after.stdout.contains("\tlisted.iso\t"), "\(after.stdout)")
        let finished = try await DLProcess.run(["--list", "-d", "nothing"], in: work)
        #expect(finished.status == 0 && finished.stdout.isEmpty)
        #expect(finished.stderr.contains("nothing unfinished in"), "\(finished.stderr)")
        #expect(!FileManager.default.fileExists(atPath: work.appendingPathComponent("nothing").path), "creates nothing")
    }
}
