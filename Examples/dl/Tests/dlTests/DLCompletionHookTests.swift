import Downloader
import Foundation
import HTTPTestServer
import Testing

/// Issue #36: `dl --on-complete CMD` runs CMD after each verified file, as aria2's `--on-download-complete`.
@Suite("dl --on-complete")
final class DLCompletionHookTests: Sendable, DLFileChecks {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var work: URL { workspace.directory }

    init() throws {
        workspace = try TestWorkspace(prefix: "dl-hook")
    }

    @Test("CMD gets the path as its last argument and DL_PATH, DL_URL, DL_CHECKSUM; a name is never shell syntax")
    func runsPerFile() async throws {
        let log = work.appendingPathComponent("hook.log")
        let script = work.appendingPathComponent("hook.sh")
        try "#!/bin/sh\nprintf '%s|%s|%s|%s\\n' \"$1\" \"$DL_PATH\" \"$DL_URL\" \"$DL_CHECKSUM\" >> '\(log.path)'\n"
            .write(to: script, atomically: true, encoding: .utf8)
        // Read by sh, not executed: another test's child forked while the script was open for writing would make
        // executing it fail with ETXTBSY (found by the loaded runs).
        let a = server.url("/bytes/a.bin?size=5000")
        let b = server.url("/bytes/b.bin?size=7000")
        let outcome = try await DLProcess.run(
            ["-q", "-d", "out", "--on-complete", "sh " + script.path, a.absoluteString, b.absoluteString], in: work)
        #expect(outcome.status == 0 && outcome.stderr.isEmpty, "\(outcome.stderr)")
        let lines = try String(contentsOf: log, encoding: .utf8).split(separator: "\n").map(String.init).sorted()
        let path = { (name: String) in self.work.appendingPathComponent("out/" + name).standardizedFileURL.path }
        let md5 = { (name: String, size: Int) in TestContent(name: name, size: size).md5.hexString }
        #expect(
            lines == [
                "\(path("a.bin"))|\(path("a.bin"))|\(a.absoluteString)|md5=\(md5("a.bin", 5000))",
                "\(path("b.bin"))|\(path("b.bin"))|\(b.absoluteString)|md5=\(md5("b.bin", 7000))",
            ], "\(lines)")

        // A hostile name: `$(…)` and `;` in it are data, not commands.
        let hostile = "x;touch pwned$(touch pwned2).bin"
        let named = try await DLProcess.run(
            [
                "-q", "-d", "out", "-o", hostile, "--on-complete", "test -f",
                server.url("/bytes/h?size=100").absoluteString,
            ],
            in: work)
        #expect(named.status == 0 && named.stderr.isEmpty, "\(named.stderr)")
        #expect(!FileManager.default.fileExists(atPath: work.appendingPathComponent("pwned").path))
        #expect(!FileManager.default.fileExists(atPath: work.appendingPathComponent("pwned2").path))
    }

    @Test("A failing command is reported and changes nothing else")
    func failureIsNotFatal() async throws {
        let outcome = try await DLProcess.run(
            ["-d", "f", "--on-complete", "false", server.url("/bytes/f.bin?size=1000").absoluteString], in: work)
        #expect(outcome.status == 0)
        #expect(outcome.stderr.contains("--on-complete failed for") && outcome.stderr.contains("exit status 1"))
        #expect(try md5(work.appendingPathComponent("f/f.bin")) == content("f.bin", 1000))
    }
}
