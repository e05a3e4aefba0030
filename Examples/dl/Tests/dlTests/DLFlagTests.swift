import Downloader
import Foundation
import HTTPTestServer
import Testing

/// The flags people type by habit from wget and aria2 (issue #14), each run through the built `dl`.
@Suite("dl flags")
final class DLFlagTests: Sendable, DLFileChecks {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var work: URL { workspace.directory }

    init() throws {
        workspace = try TestWorkspace(prefix: "dl-flags")
    }

    var dir: URL { work.appendingPathComponent("out") }

    @Test("-O writes the one URL to exactly that path, replaces a file there, and leaves nothing else")
    func output() async throws {
        let url = server.url("/bytes/o?size=40000&filename=other-name.bin")
        let target = work.appendingPathComponent("sub/exact.iso")
        try FileManager.default.createDirectory(
            at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("old".utf8).write(to: target)
        let outcome = try await DLProcess.run(["-O", "sub/exact.iso", url.absoluteString], in: work)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(outcome.lines == [target.standardizedFileURL.path])
        #expect(try md5(target) == content("o", 40000))
        #expect(entries(target.deletingLastPathComponent()) == ["exact.iso"], "no state, no (1) copy")
        #expect(!FileManager.default.fileExists(atPath: work.appendingPathComponent("downloads").path))
    }

    @Test("-P and -Pdir are --dir; -c is accepted")
    func directoryAliases() async throws {
        let a = server.url("/bytes/pa?size=1000")
        let b = server.url("/bytes/pb?size=1000")
        let first = try await DLProcess.run(["-c", "-P", "p1", a.absoluteString], in: work)
        let second = try await DLProcess.run(["-Pp2", b.absoluteString], in: work)
        #expect(first.status == 0 && second.status == 0, "\(first.stderr)\(second.stderr)")
        #expect(first.lines == [work.appendingPathComponent("p1/pa").standardizedFileURL.path])
        #expect(second.lines == [work.appendingPathComponent("p2/pb").standardizedFileURL.path])
    }

    @Test("-i reads aria2's format: out=, dir=, checksum=, header= per URL; comments and blank lines skipped")
    func inputFile() async throws {
        let a = server.url("/bytes/ia?size=3000")
        let b = server.url("/bytes/ib?size=4000")
        let c = server.url("/bytes/ic?size=5000")
        let wrong = server.url("/bytes/id?size=1000")
        let list = """
            # a list
            \(a.absoluteString)
              out=renamed.bin
              header=X-Per-URL: yes

            \(b.absoluteString)
            \tdir=\(work.appendingPathComponent("elsewhere").path)
            \tchecksum=md5=\(content("ib", 4000))
            \(c.absoluteString)
            \(wrong.absoluteString)
              checksum=md5=\(String(repeating: "0", count: 32))
            """
        try list.write(to: work.appendingPathComponent("list.txt"), atomically: true, encoding: .utf8)
        let outcome = try await DLProcess.run(
            ["--dir", dir.path, "--retries", "0", "-i", "list.txt"], in: work)
        #expect(outcome.status == 1, "the wrong checksum fails: \(outcome.stderr)")
        #expect(
            Set(outcome.lines) == [
                dir.appendingPathComponent("renamed.bin").path,
                work.appendingPathComponent("elsewhere/ib").standardizedFileURL.path,
                dir.appendingPathComponent("ic").path,
            ])
        #expect(try md5(dir.appendingPathComponent("renamed.bin")) == content("ia", 3000))
        #expect(outcome.stderr.contains("id"))
        let perURL = server.requests.filter { $0.value(forHeader: "X-Per-URL") == "yes" }.map(\.path)
        #expect(Set(perURL) == ["/bytes/ia"])
    }

    @Test("--max-overall-limit is shared by every download")
    func overallLimit() async throws {
        let urls = (0..<2).map { server.url("/bytes/all\($0)?size=\(3 << 19)").absoluteString }
        let clock = ContinuousClock()
        let began = clock.now
        let outcome = try await DLProcess.run(["--dir", dir.path, "--max-overall-limit", "1m"] + urls, in: work)
        let seconds = (clock.now - began) / .seconds(1)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(seconds >= 2.7, "3 MiB together at 1 MiB/s took \(seconds) s")
    }

    @Test("--timeout closes a request that receives nothing; the retry is shown, then the failure")
    func timeout() async throws {
        let url = server.url("/bytes/stuck?size=5000&stallAfter=1000&stall=60&stallCount=5")
        let outcome = try await DLProcess.run(
            ["--dir", dir.path, "--timeout", "0.5", "--retries", "1", url.absoluteString], in: work)
        #expect(outcome.status == 1)
        #expect(outcome.stderr.contains("no data for 0.5 s"), "\(outcome.stderr)")
        #expect(outcome.stderr.contains("retry 1 in"), "the retry is visible: \(outcome.stderr)")
    }

    @Test("--lowest-speed-limit treats a trickling body as stalled (after aria2's 30 s)")
    func lowestSpeed() async throws {
        let url = server.url("/bytes/trickle?size=1000000&rate=2000")
        // `-T 900`: the speed check alone ends the request. Once in CI (stop 60) the trickle reached dl not at all for
        // 30 s, and the default 30 s timeout ended it first ("no data for 30 s"): both rules were due at once.
        let outcome = try await DLProcess.run(
            ["--dir", dir.path, "--lowest-speed-limit", "100k", "-T", "900", "--retries", "0", url.absoluteString],
            in: work)
        #expect(outcome.status == 1)
        #expect(outcome.stderr.contains("slower than 102400 bytes/s for 30 s"), "\(outcome.stderr)")
    }

    @Test("--user-agent is sent, and dl names itself by default")
    func userAgent() async throws {
        let a = server.url("/bytes/ua?size=10")
        let b = server.url("/bytes/ub?size=10")
        _ = try await DLProcess.run(
            ["--dir", dir.path, "--user-agent", "Mozilla/5.0 test", a.absoluteString], in: work)
        _ = try await DLProcess.run(["--dir", dir.path, b.absoluteString], in: work)
        let agents = Dictionary(
            server.requests.map { ($0.path, $0.value(forHeader: "User-Agent") ?? "") }, uniquingKeysWith: { a, _ in a })
        #expect(agents["/bytes/ua"] == "Mozilla/5.0 test")
        #expect(agents["/bytes/ub"]?.hasPrefix("dl/") == true, "\(agents)")
    }

    @Test("A User-Agent given as a header, in any letter case, is the one sent")
    func userAgentHeaderAnyCase() async throws {
        // dl's own agent used to travel as a per-download header beside the caller's: `user-agent` and `User-Agent`
        // were two keys, and which one went out followed the process's hash seed. Six runs, six seeds.
        for run in 0..<6 {
            let url = server.url("/bytes/uc\(run)?size=10")
            let outcome = try await DLProcess.run(
                ["--dir", dir.path, "-H", "user-agent: mine/\(run)", url.absoluteString], in: work)
            #expect(outcome.status == 0, "\(outcome.stderr)")
        }
        let list = work.appendingPathComponent("agents.txt")
        try "\(server.url("/bytes/ud?size=10").absoluteString)\n  header=USER-AGENT: listed/1\n".write(
            to: list, atomically: true, encoding: .utf8)
        let listed = try await DLProcess.run(["--dir", dir.path, "-i", list.path], in: work)
        #expect(listed.status == 0, "\(listed.stderr)")
        let sent = server.requests.filter { $0.path.hasPrefix("/bytes/uc") || $0.path == "/bytes/ud" }.map {
            "\($0.path) \($0.value(forHeader: "User-Agent") ?? "-")"
        }
        #expect(sent.count >= 7)
        for line in sent {
            let path = line.split(separator: " ")[0]
            let expected = path == "/bytes/ud" ? "listed/1" : "mine/\(path.dropFirst("/bytes/uc".count))"
            #expect(line == "\(path) \(expected)", "\(sent)")
        }
    }

    @Test("A header named twice in different letter cases goes out once: the later -H, an input line's over -H")
    func headerNamesIgnoreCase() async throws {
        // Each was a key of its own, and the process's hash seed chose which went out. Six runs, six seeds.
        for run in 0..<6 {
            let list = work.appendingPathComponent("teams\(run).txt")
            let lines = [
                server.url("/bytes/hc\(run)?size=10").absoluteString, "  header=x-team: listed\(run)",
                server.url("/bytes/hd\(run)?size=10").absoluteString,
            ]
            try lines.joined(separator: "\n").write(to: list, atomically: true, encoding: .utf8)
            let outcome = try await DLProcess.run(
                ["--dir", dir.path, "-H", "X-Team: first", "-H", "x-TEAM: second\(run)", "-i", list.path], in: work)
            #expect(outcome.status == 0, "\(outcome.stderr)")
        }
        let sent = server.requests.filter { $0.path.hasPrefix("/bytes/hc") || $0.path.hasPrefix("/bytes/hd") }.map {
            "\($0.path) \($0.value(forHeader: "X-Team") ?? "-")"
        }
        #expect(sent.count >= 12)
        for line in sent {
            let path = line.split(separator: " ")[0]
            let run = path.dropFirst("/bytes/hc".count)
            let expected = path.hasPrefix("/bytes/hc") ? "listed\(run)" : "second\(run)"
            #expect(line == "\(path) \(expected)", "\(sent)")
        }
    }

    @Test("--version and --help print to stdout and exit 0; --help lists every flag and the exit codes")
    func versionAndHelp() async throws {
        let version = try await DLProcess.run(["--version"], in: work)
        #expect(version.status == 0 && version.stdout.hasPrefix("dl 1.0.0 "), "\(version.stdout)")
        let help = try await DLProcess.run(["-h"], in: work)
        #expect(help.status == 0)
        for flag in [
            "--help", "--version", "--input-file", "--dir", "-P", "--output", "-O", "--continue", "--max-active",
            "--lifo", "--naming", "--header", "--user-agent", "--retries", "--timeout", "--lowest-speed-limit",
            "--limit-rate", "--max-overall-limit", "--wait", "--md5", "--checksum", "--checksum-file",
            "--checksum-optional", "--no-md5", "--quiet", "-q", "--list", "--result-log", "--max-connections-per-host",
            "Exit status", "130", "143",
        ] {
            #expect(help.stdout.contains(flag), "\(flag) is missing from --help")
        }
    }

    @Test(
        "Empty, missing and bad values are usage errors (exit 2)",
        arguments: [
            ["--dir=", "http://127.0.0.1:1/a", "http://127.0.0.1:1/b"], ["--dir", "", "http://127.0.0.1:1/a"],
            ["-O"], ["-O", "f", "http://127.0.0.1:1/a", "http://127.0.0.1:1/b"],
            ["-O", "-", "-o", "x", "http://127.0.0.1:1/a"],
            ["--limit-rate", "0", "http://127.0.0.1:1/a"], ["--limit-rate", "fast", "http://127.0.0.1:1/a"],
            ["--max-overall-limit", "", "http://127.0.0.1:1/a"], ["--timeout", "-1", "http://127.0.0.1:1/a"],
            ["--lowest-speed-limit", "1x", "http://127.0.0.1:1/a"], ["--lifo=yes", "http://127.0.0.1:1/a"],
            ["--user-agent=", "http://127.0.0.1:1/a"], ["-i", "no-such-file"], ["--version=2"],
            ["--max-connections-per-host", "0", "http://127.0.0.1:1/a"],
        ])
    func usageErrors(arguments: [String]) async throws {
        let outcome = try await DLProcess.run(arguments, in: work)
        #expect(outcome.status == 2, "\(arguments): \(outcome.stderr)")
        #expect(outcome.stderr.hasPrefix("dl: ") && outcome.stderr.contains("usage: dl"))
        #expect(outcome.stdout.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: work.appendingPathComponent("http:").path))
    }

    @Test(
        "A bad input file is a usage error naming the line",
        arguments: [
            "  out=x\nhttp://127.0.0.1:1/a", "http://127.0.0.1:1/a\n  speed=3", "http://127.0.0.1:1/a\n  out=../x",
        ])
    func badInputFile(text: String) async throws {
        try text.write(to: work.appendingPathComponent("bad.txt"), atomically: true, encoding: .utf8)
        let outcome = try await DLProcess.run(["-i", "bad.txt"], in: work)
        #expect(outcome.status == 2)
        #expect(outcome.stderr.contains("input file line"), "\(outcome.stderr)")
    }

    /// Quiet too: the switch is a warning, which `-q` still shows (it subscribes to warnings only).
    @Test(
        "-i takes aria2's tab-separated URIs for one file: when the URL fails, its mirror serves the file",
        arguments: [false, true])
    func inputFileMirrors(quiet: Bool) async throws {
        let mirrorServer = try HTTPTestServer()
        defer { mirrorServer.stop() }
        // Nothing listens on port 1 of the loopback: the URL's connection is refused.
        let text = "http://127.0.0.1:1/data.bin\t\(mirrorServer.url("/bytes/dlm?size=50000"))\n"
        try text.write(to: work.appendingPathComponent("list.txt"), atomically: true, encoding: .utf8)
        let folder = dir.appendingPathComponent(quiet ? "quiet" : "plain")
        let outcome = try await DLProcess.run(
            (quiet ? ["-q"] : []) + ["--dir", folder.path, "-i", "list.txt"], in: work)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        let file = folder.appendingPathComponent("data.bin")
        #expect(MD5.hash(data: try Data(contentsOf: file)) == TestContent(name: "dlm", size: 50000).md5)
        #expect(outcome.stderr.contains("mirror"), "the switch is reported: \(outcome.stderr)")
        if quiet {
            let lines = outcome.stderr.split(separator: "\n")
            #expect(lines.allSatisfy { $0.hasPrefix("dl: warning: ") }, "quiet: warnings only: \(outcome.stderr)")
        }
    }
}
