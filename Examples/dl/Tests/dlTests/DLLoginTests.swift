import Downloader
import Foundation
import HTTPTestServer
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue #36: `dl` logs in as wget and aria2c do — `~/.netrc` by default, `--netrc-file`, `--no-netrc`, `--user` and
/// `--password` — answering a 401 Basic challenge, and writes no password anywhere. On d1ecfd3 every case was a 401
/// and exit 1 (`.netrc` was ignored and the flags were unknown).
@Suite("dl logins")
final class DLLoginTests: Sendable, DLFileChecks {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var work: URL { workspace.directory }

    init() throws {
        workspace = try TestWorkspace(prefix: "dl-logins")
    }

    /// A home folder with a `.netrc` holding `text`, for the child's `HOME`.
    func home(netrc text: String) throws -> [String: String] {
        let home = work.appendingPathComponent("home")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        try text.write(to: home.appendingPathComponent(".netrc"), atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home.path
        return environment
    }

    @Test("~/.netrc is read by default (machine, then default); --no-netrc does not read it")
    func netrcByDefault() async throws {
        let environment = try home(
            netrc: """
                # comments and a macdef are skipped
                macdef init
                cd /pub

                machine example.invalid login nobody password nothing
                machine 127.0.0.1
                    login alice
                    password "two words"
                default login bob password other
                """)
        let url = server.url("/bytes/n1.bin?size=70000&auth=alice:two%20words")
        let outcome = try await DLProcess.run(
            ["-q", "-d", "a", url.absoluteString], in: work, environment: environment)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(try md5(work.appendingPathComponent("a/n1.bin")) == content("n1.bin", 70000))
        let refused = try await DLProcess.run(
            ["-q", "--no-netrc", "-d", "b", url.absoluteString], in: work, environment: environment)
        #expect(refused.status == 1 && refused.stderr.contains("401"), "\(refused.stderr)")
        // `default` answers a host without a machine line (localhost is this server under another name).
        let other = URL(string: "http://localhost:\(server.port)/bytes/n2.bin?size=1000&auth=bob:other")!
        let byDefault = try await DLProcess.run(
            ["-q", "-d", "c", other.absoluteString], in: work, environment: environment)
        #expect(byDefault.status == 0, "\(byDefault.stderr)")
    }

    @Test("A resume without its login fails at the first answer (the 401) and says how to give one (issue #48)")
    func resumeWithoutLogin() async throws {
        let url = server.url(
            "/bytes/relogin.bin?size=\(8 << 20)&auth=dave:pw&stallAfter=\(1 << 20)&stall=60&stallCount=1&stallReached=1"
        )
        let first = try DLProcess(
            ["-q", "--no-netrc", "--user", "dave", "--password", "pw", "-d", "r", url.absoluteString], in: work)
        #expect(await first.send(SIGTERM, when: server) { $0.stallsBegun >= 1 })
        #expect(await first.wait().status == 143)
        server.resetStatistics()
        let rerun = try DLProcess(["--no-netrc", "-d", "r", url.absoluteString], in: work)
        let outcome = await rerun.wait()
        #expect(outcome.status == 1, "\(outcome.stderr)")
        // Before the fix the 401 was retried with growing pauses for 203 s; now the first answer ends it.
        let asked = server.statistics.requests.filter { $0.path == "/bytes/relogin.bin" }
        #expect(asked.count == 1, "\(asked.map(\.headers))")
        #expect(outcome.stderr.contains("401"), "\(outcome.stderr)")
        #expect(outcome.stderr.contains("--user"), "how to give a login: \(outcome.stderr)")
    }

    @Test(
        "Passwords and secret headers are blanked in the process list for the whole run, as curl does (issue #48)",
        .enabled(if: Platform.isLinux, "reads /proc/PID/cmdline"))
    func passwordLeavesTheProcessList() async throws {
        let url = server.url("/bytes/hidden.bin?size=\(4 << 20)&auth=erin:s3cr3t-pw&stallAfter=\(1 << 20)&stall=600")
        var withPassword = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        withPassword.user = "erin"
        withPassword.password = "s3cr3t-pw"
        let running = try DLProcess(
            [
                "-q", "--no-netrc", "-d", "h", "--timeout", "900", "--user", "erin", "--password", "s3cr3t-pw",
                "--http-password=s3cr3t-pw", "-H", "Proxy-Authorization: Bearer tok3n-s3cr3t",
                "--header=Cookie: c00kie-s3cr3t",
                withPassword.url!.absoluteString,
            ], in: work)
        #expect(await server.waitUntil { $0.stallsBegun >= 1 })
        // Read while dl runs (a process that ended has an empty command line): the stall outlasts any deadline here.
        var cmdline = ""
        let deadline = ContinuousClock.now + .seconds(60)
        while cmdline.isEmpty && running.isRunning && ContinuousClock.now < deadline {
            cmdline = Platform.commandLine(of: running.pid)
        }
        running.send(SIGTERM)
        let outcome = await running.wait()
        #expect(cmdline.contains("--user") && cmdline.contains("erin"), "the rest stays; dl said: \(outcome.stderr)")
        // (The test server's own `auth=` option in the query names the password: not a secret of dl's.)
        let shown = cmdline.replacingOccurrences(of: "\0", with: " ")
        for secret in [
            "--password s3cr3t-pw", "--http-password=s3cr3t-pw", ":s3cr3t-pw@", "tok3n-s3cr3t", "c00kie-s3cr3t",
        ] {
            #expect(!shown.contains(secret), "\(secret) in \(shown)")
        }
    }

    @Test("--password-file, DL_PASSWORD and --ask-password give the password without the command line (issue #48)")
    func passwordSources() async throws {
        let url = server.url("/bytes/sources.bin?size=5000&auth=fay:from%20elsewhere")
        let file = work.appendingPathComponent("password")
        try "from elsewhere\nsecond line\n".write(to: file, atomically: true, encoding: .utf8)
        let fromFile = try await DLProcess.run(
            ["-q", "--no-netrc", "-d", "p1", "--user", "fay", "--password-file", file.path, url.absoluteString],
            in: work)
        #expect(fromFile.status == 0, "\(fromFile.stderr)")
        var environment = ProcessInfo.processInfo.environment
        environment["DL_PASSWORD"] = "from elsewhere"
        let fromEnvironment = try await DLProcess.run(
            ["-q", "--no-netrc", "-d", "p2", "--user", "fay", url.absoluteString], in: work, environment: environment)
        #expect(fromEnvironment.status == 0, "\(fromEnvironment.stderr)")
        // No terminal (the test runs dl in a session of its own): --ask-password reads a line of stdin.
        let asking = try DLProcess(
            ["-q", "--no-netrc", "-d", "p3", "--user", "fay", "--ask-password", url.absoluteString], in: work,
            inputPipe: true)
        asking.writeInput("from elsewhere\n")
        asking.closeInput()
        let asked = await asking.wait()
        #expect(asked.status == 0, "\(asked.stderr)")
        let both = try await DLProcess.run(
            ["--user", "fay", "--password", "x", "--ask-password", url.absoluteString], in: work)
        #expect(both.status == 2 && both.stderr.contains("give one"), "\(both.stderr)")
    }

    @Test("A login given for one origin never goes to another port after a redirect; .netrc names hosts (issue #48)")
    func loginStaysWithItsOrigin() async throws {
        let other = try HTTPTestServer()  // the same host, another port
        defer { other.stop() }
        let target = other.url("/bytes/port.bin?size=5000&auth=hal:pw")
        let escaped = target.absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let url = server.url("/goto?to=\(escaped)")
        let given = try await DLProcess.run(
            ["-q", "--no-netrc", "-d", "o1", "--user", "hal", "--password", "pw", url.absoluteString], in: work)
        #expect(given.status == 1 && given.stderr.contains("401"), "\(given.stderr)")
        #expect(!other.requests.contains { $0.value(forHeader: "Authorization") != nil }, "sent to another origin")
        // A .netrc machine is a host name, whatever the port.
        let file = work.appendingPathComponent("netrc-hosts")
        try "machine 127.0.0.1 login hal password pw".write(to: file, atomically: true, encoding: .utf8)
        let fromNetrc = try await DLProcess.run(
            ["-q", "-d", "o2", "--netrc-file", file.path, url.absoluteString], in: work)
        #expect(fromNetrc.status == 0, "\(fromNetrc.stderr)")
    }

    @Test("--user/--password and --http-user/--http-password win over .netrc; --netrc-file reads another file")
    func flags() async throws {
        let environment = try home(netrc: "machine 127.0.0.1 login alice password wrong\n")
        let url = server.url("/bytes/f1.bin?size=5000&auth=carol:pw")
        for (index, flags) in [["--user", "carol", "--password", "pw"], ["--http-user=carol", "--http-password=pw"]]
            .enumerated()
        {
            let outcome = try await DLProcess.run(
                ["-q", "-d", "u\(index)"] + flags + [url.absoluteString], in: work, environment: environment)
            #expect(outcome.status == 0, "\(flags): \(outcome.stderr)")
        }
        let file = work.appendingPathComponent("logins")
        try "machine 127.0.0.1 login carol password pw".write(to: file, atomically: true, encoding: .utf8)
        let fromFile = try await DLProcess.run(
            ["-q", "-d", "f", "--netrc-file", file.path, url.absoluteString], in: work, environment: environment)
        #expect(fromFile.status == 0, "\(fromFile.stderr)")
        let missing = try await DLProcess.run(["--netrc-file", "/nonexistent/netrc", url.absoluteString], in: work)
        #expect(missing.status == 2 && missing.stderr.contains("cannot read"))
        let alone = try await DLProcess.run(["--password", "pw", url.absoluteString], in: work)
        #expect(alone.status == 2 && alone.stderr.contains("--password needs --user"))
    }

    @Test("An interrupted login download keeps no password on disk, and the rerun logs in again and resumes")
    func noPasswordOnDisk() async throws {
        let environment = try home(netrc: "machine 127.0.0.1 login alice password hunter2\n")
        // The first run is stopped by SIGTERM once 100 KB were sent: the response then pauses (a minute) first.
        let url = server.url(
            "/bytes/big.bin?size=400000&auth=alice:hunter2&stallAfter=100000&stall=300&stallCount=1&stallReached=1")
        let process = try DLProcess(
            ["-q", "-T", "300", "-d", "r", url.absoluteString], in: work, environment: environment)
        #expect(await server.waitUntil { $0.stallsBegun >= 1 })
        process.send(SIGTERM)
        let first = await process.wait()
        #expect(first.status == 143, "\(first.stderr)")
        var onDisk = ""
        for path in FileManager.default.enumerator(atPath: work.appendingPathComponent("r").path)?.allObjects
            as? [String] ?? []
        {
            let data = FileManager.default.contents(atPath: work.appendingPathComponent("r/" + path).path) ?? Data()
            onDisk += String(decoding: data, as: UTF8.self)
        }
        let header = Data("alice:hunter2".utf8).base64EncodedString()
        #expect(!onDisk.isEmpty && !onDisk.contains(header), "the Authorization value reached the disk")
        let second = try await DLProcess.run(["-q", "-d", "r", url.absoluteString], in: work, environment: environment)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(try md5(work.appendingPathComponent("r/big.bin")) == content("big.bin", 400000))
        let resumed = server.requests.filter { $0.path == "/bytes/big.bin" && ($0.rangeStart ?? 0) > 0 }
        #expect(!resumed.isEmpty, "the rerun resumed by Range")
    }
}
