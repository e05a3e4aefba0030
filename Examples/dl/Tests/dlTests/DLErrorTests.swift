import Foundation
import HTTPTestServer
import Testing

/// Issue #23 through the built `dl`: a failure nothing will change (unknown host, untrusted certificate) ends at once
/// with the reason and the next step, not after the retries.
@Suite("dl errors")
final class DLErrorTests: Sendable {
    let workspace: TestWorkspace
    var work: URL { workspace.directory }

    init() throws {
        workspace = try TestWorkspace(prefix: "dl-errors")
    }

    /// Whether this machine lets us run a process in a network namespace of its own (`unshare -n`): there, no name
    /// resolves and no query leaves the machine.
    static let canIsolateNetwork: Bool = {
        guard let pid = try? ChildProcess.spawn("/usr/bin/unshare", ["-n", "true"]) else { return false }
        return ChildProcess.wait(pid) == 0
    }()

    @Test(
        "An unknown host fails at once with the resolver's reason and no retries (in a namespace without a network)",
        .enabled(if: canIsolateNetwork))
    func unknownHost() async throws {
        let outcome = try await DLProcess(
            ["-n", DLProcess.binary.path, "--retries", "5", "--dir", work.path, "http://nosuchhost.invalid/file.bin"],
            in: work, executable: URL(fileURLWithPath: "/usr/bin/unshare")
        ).wait()
        #expect(outcome.status == 1, "\(outcome.stderr)")
        #expect(outcome.stderr.contains("Could not resolve host"), "\(outcome.stderr)")
        #expect(outcome.stderr.contains("URLError -1003"), "\(outcome.stderr)")
        #expect(!outcome.stderr.contains("; retry "), "a permanent error was retried: \(outcome.stderr)")
    }

    @Test(
        "An untrusted certificate fails at once with libcurl's reason and how to trust a CA",
        .enabled(if: TLSServer.isAvailable))
    func untrustedCertificate() async throws {
        // Key generation and a wait for openssl: off the cooperative threads.
        let tls = try await RawHTTPClient.onThread { Result { try TLSServer() } }.get()
        defer { tls.stop() }
        let outcome = try await DLProcess.run(
            ["--retries", "5", "--dir", work.path, "https://127.0.0.1:\(tls.port)/file.bin"], in: work)
        #expect(outcome.status == 1, "\(outcome.stderr)")
        #expect(outcome.stderr.contains("SSL certificate problem"), "\(outcome.stderr)")
        #expect(outcome.stderr.contains("update-ca-certificates"), "\(outcome.stderr)")
        #expect(!outcome.stderr.contains("; retry "), "a permanent error was retried: \(outcome.stderr)")
    }
}
