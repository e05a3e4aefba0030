import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Issue #13 end to end: what is verified and how, and no spliced file without validators.
@Suite("Integrity")
final class IntegrityTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var temporary: TemporaryDirectory { TemporaryDirectory(existing: workspace.directory) }

    init() throws {
        workspace = try TestWorkspace()
    }

    func makeManager(window: Int = 16 << 20) throws -> DownloadManager {
        try DownloadManager(configuration: .forTests(directory: temporary.url, window: window))
    }

    /// The MD5s of every whole version the server could have served.
    func versions(_ name: String, size: Int, count: Int = 6) -> Set<MD5Digest> {
        Set((0..<count).map { TestContent(name: name, size: size, version: $0).md5 })
    }

    @Test("A resume without validators never splices two versions: a retry after a drop, content changed meanwhile")
    func noSpliceOnRetry() async throws {
        let manager = try makeManager()
        // No ETag, no Last-Modified, a new version (same length) with every GET, and the first GET cut at 100 000.
        let url = server.url("/bytes/splice?size=300000&etag=none&lastModified=none&change=1&dropAt=100000")
        let receipt = try await manager.download(url)
        #expect(versions("splice", size: 300_000).contains(try md5OfFile(receipt.fileURL)), "a whole version")
        await manager.shutdown()
    }

    @Test("A resume without validators never splices two versions: a later run resumes a partial file from disk")
    func noSpliceAcrossRuns() async throws {
        let path = "/bytes/splice2?size=300000&etag=none&lastModified=none&change=1&dropAt=100000"
        let directory = DownloadDirectory(root: temporary.url)
        let bridge = TransferTests.sharedBridge
        // One request for the whole file (no short first request), cut at 100 000.
        let first = await runTransfer(
            Transfer(
                url: server.url(path), options: DownloadOptions(), directory: directory, bridge: bridge,
                configuration: .init(firstWindowSize: 8 << 20, firstRequestBudget: nil)))
        #expect(throws: DownloadError.connectionFailed) { try first.get() }
        #expect(fileSize(directory.partialFile(for: server.url(path))) == 100_000)
        // A bare Transfer has no retry loop; like the manager's, retry a transient fault (a loaded machine has shown
        // one connection closed without a reply here), resuming from what is on disk.
        var outcome = Result<TransferResult, DownloadError>.failure(.cancelled(server.url(path)))
        for _ in 0..<3 {
            outcome = await runTransfer(
                Transfer(url: server.url(path), options: DownloadOptions(), directory: directory, bridge: bridge))
            guard case .failure(let error) = outcome, error.isTransient else { break }
        }
        let result = try outcome.get()
        #expect(versions("splice2", size: 300_000).contains(try md5OfFile(result.fileURL)), "a whole version")
    }
}

extension IntegrityTests {
    @Test("Without validators and without a change, a resume continues from 64 KiB before the cut, once")
    func continuityCheckPasses() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/same?size=300000&etag=none&lastModified=none&dropAt=100000")
        let receipt = try await manager.download(url)
        #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "same", size: 300_000).md5)
        let gets = server.requests.filter { $0.method == "GET" && $0.path == "/bytes/same" }
        // The short first request; the next window asks again for the 64 KiB before it, and so does the resume.
        #expect(gets.map(\.rangeStart) == [0, 0, 100_000 - 65_536])
        await manager.shutdown()
    }

    @Test("An expected SHA-256 is the hash computed; a wrong one gets one clean restart, then checksumMismatch")
    func sha256Expectation() async throws {
        let manager = try makeManager()
        let content = TestContent(name: "sha", size: 500_000)
        let right = try Checksum(parsing: "sha-256=\(content.sha256.hexString)")
        let receipt = try await manager.download(
            server.url("/bytes/sha?size=500000"), options: DownloadOptions(checksum: right))
        #expect(receipt.checksum == right && receipt.verification == .checksum(right) && receipt.md5 == nil)
        #expect(try systemSHA256(receipt.fileURL) == content.sha256.hexString)

        let wrong = try Checksum(parsing: String(repeating: "ab", count: 32))
        let url = server.url("/bytes/sha-wrong?size=500000")
        await #expect(throws: DownloadError.checksumMismatch) {
            try await manager.download(url, options: DownloadOptions(checksum: wrong))
        }
        // One attempt, then one clean restart: two GETs from byte 0. (Each is one whole window when the connection the
        // first download left is predicted to be reusable, else a short first request and the rest: on a loaded
        // machine the idle connection's prediction can lapse.)
        let gets = server.requests.filter { $0.path == "/bytes/sha-wrong" && $0.method == "GET" }
        #expect(gets.filter { ($0.rangeStart ?? 0) == 0 }.count == 2, "\(gets.map(\.range))")
        #expect(gets.count <= 4, "\(gets.map(\.range))")
        await manager.shutdown()
    }

    func systemSHA256(_ file: URL) throws -> String? {
        try systemDigest("/usr/bin/sha256sum", of: file) ?? SHA256.hash(data: try Data(contentsOf: file)).hexString
    }

    @Test("A server's Repr-Digest (RFC 9530) and Digest (RFC 3230) SHA-256 are hashed and checked; a wrong one fails")
    func serverDigests() async throws {
        let manager = try makeManager()
        for option in ["repr=1", "digest=sha256"] {
            let content = TestContent(name: "d-\(option)", size: 200_000)
            let receipt = try await manager.download(server.url("/bytes/d-\(option)?size=200000&\(option)"))
            let expected = Checksum(algorithm: .sha256, digest: content.sha256.bytes)!
            #expect(receipt.verification == .checksum(expected), "\(option)")
        }
        await #expect(throws: DownloadError.checksumMismatch) {
            try await manager.download(self.server.url("/bytes/d-bad?size=200000&repr=bad"))
        }
        // The caller's expectation wins over the server's digest.
        let content = TestContent(name: "d-win", size: 100_000)
        let md5 = Checksum(algorithm: .md5, digest: content.md5.bytes)!
        let receipt = try await manager.download(
            server.url("/bytes/d-win?size=100000&repr=bad"), options: DownloadOptions(checksum: md5))
        #expect(receipt.verification == .checksum(md5))
        await manager.shutdown()
    }

    @Test("The receipt says what was verified: a checksum compared, computed only, or the length only")
    func verificationKinds() async throws {
        let manager = try makeManager()
        let plain = try await manager.download(server.url("/bytes/v1?size=1000"))
        #expect(
            plain.verification
                == .computed(Checksum(algorithm: .md5, digest: TestContent(name: "v1", size: 1000).md5.bytes)!))
        let unhashed = try await manager.download(
            server.url("/bytes/v2?size=1000"), options: DownloadOptions(computesChecksum: false))
        #expect(unhashed.verification == .lengthOnly && unhashed.checksum == nil)
        let announced = try await manager.download(server.url("/bytes/v3?size=1000&md5=1"))
        #expect(
            announced.verification
                == .checksum(Checksum(algorithm: .md5, digest: TestContent(name: "v3", size: 1000).md5.bytes)!))
        // It is saved with the receipt.
        await manager.shutdown()
        let again = try makeManager()
        #expect(await again.receipt(for: server.url("/bytes/v2?size=1000"))?.verification == .lengthOnly)
        #expect(await again.receipt(for: plain.url)?.verification == plain.verification)
        await again.shutdown()
    }

    @Test("A partial file hashed with MD5 resumed with an expected SHA-256 is hashed again from byte 0 and verified")
    func resumeWithAnotherAlgorithm() async throws {
        let path = "/bytes/switch?size=300000&dropAt=150000"
        let directory = DownloadDirectory(root: temporary.url)
        let bridge = TransferTests.sharedBridge
        // One request for the whole file (no short first request), cut at 100 000.
        let first = await runTransfer(
            Transfer(
                url: server.url(path), options: DownloadOptions(), directory: directory, bridge: bridge,
                configuration: .init(firstWindowSize: 8 << 20, firstRequestBudget: nil)))
        #expect(throws: DownloadError.connectionFailed) { try first.get() }
        let content = TestContent(name: "switch", size: 300_000)
        let sha = Checksum(algorithm: .sha256, digest: content.sha256.bytes)!
        let result = try await Transfer(
            url: server.url(path), options: DownloadOptions(checksum: sha), directory: directory, bridge: bridge
        ).run()
        #expect(result.verification == .checksum(sha) && result.resumedBytes == 150_000)
    }
}

@Suite("Checksum")
struct ChecksumTests {
    static let empty256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    @Test(
        "The forms people paste",
        arguments: [
            ("sha-256=\(empty256)", Checksum.Algorithm.sha256), ("sha256:\(empty256)", .sha256),
            ("SHA256=\(empty256.uppercased())", .sha256),
            ("  \(empty256)\n", .sha256), ("md5=d41d8cd98f00b204e9800998ecf8427e", .md5),
            ("d41d8cd98f00b204e9800998ecf8427e", .md5),
            ("sha-1=da39a3ee5e6b4b0d3255bfef95601890afd80709", .sha1),
            ("da39a3ee5e6b4b0d3255bfef95601890afd80709", .sha1),
            ("sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:", .sha256), ("MD5:1B2M2Y8AsgTpgAmY7PhCfg==", .md5),
        ])
    func forms(text: String, algorithm: Checksum.Algorithm) throws {
        let checksum = try Checksum(parsing: text)
        #expect(checksum.algorithm == algorithm)
        #expect(try Checksum(parsing: checksum.description) == checksum, "the description reads back")
    }

    @Test(
        "Bad forms are clear errors",
        arguments: [
            "", "abc", "sha-512=00", "sha-256=\(String(repeating: "0", count: 63))", "md5=xyz", "crc32=00000000",
            String(repeating: "0", count: 31), "sha-256", "=abc", "sha-256=:!!:",
        ])
    func badForms(text: String) {
        #expect(throws: DownloadError.invalidChecksum) { try Checksum(parsing: text) }
    }
}
