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
