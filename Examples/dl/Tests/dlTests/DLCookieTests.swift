import Downloader
import Foundation
import HTTPTestServer
import Testing

/// Issue #36: `--load-cookies` / `--save-cookies` in the Netscape format curl, wget and aria2c share (unknown flags on
/// d1ecfd3: exit 2).
@Suite("dl cookies")
final class DLCookieTests: Sendable, DLFileChecks {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var work: URL { workspace.directory }

    init() throws {
        workspace = try TestWorkspace(prefix: "dl-cookies")
    }

    @Test("--load-cookies opens a cookie gate at once; --save-cookies writes what the servers set, mode 0600")
    func loadAndSave() async throws {
        let saved = work.appendingPathComponent("jar.txt")
        let gated = server.url("/bytes/c1.bin?size=5000&cookieGate=cg")
        let first = try await DLProcess.run(
            ["-q", "-d", "a", "--save-cookies", saved.path, gated.absoluteString], in: work)
        #expect(first.status == 0, "\(first.stderr)")
        let text = try String(contentsOf: saved, encoding: .utf8)
        #expect(text.hasPrefix("# Netscape HTTP Cookie File") && text.contains("\tcg\topen"), "\(text)")
        let mode = try FileManager.default.attributesOfItem(atPath: saved.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)

        server.resetStatistics()
        let second = try await DLProcess.run(
            [
                "-q", "-d", "b", "--load-cookies", saved.path,
                server.url("/bytes/c2.bin?size=5000&cookieGate=cg")
                    .absoluteString,
            ], in: work)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(server.statistics.requests.allSatisfy { $0.value(forHeader: "Cookie") == "cg=open" })
        #expect(!server.statistics.requests.isEmpty)
        #expect(try md5(work.appendingPathComponent("b/c2.bin")) == content("c2.bin", 5000))

        let missing = try await DLProcess.run(
            ["-q", "--load-cookies", work.appendingPathComponent("none.txt").path, gated.absoluteString], in: work)
        #expect(missing.status == 2 && missing.stderr.contains("cookie file"), "\(missing.stderr)")
    }
}
