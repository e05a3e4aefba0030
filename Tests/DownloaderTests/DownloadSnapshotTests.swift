import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// What a service shows of its downloads (issue #35): a stable identifier with look-ups, `DownloadSnapshot` as JSON,
/// and the error kind by name.
@Suite("DownloadSnapshot and identifiers")
final class DownloadSnapshotTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var directory: URL { workspace.directory.appendingPathComponent("manager") }

    init() throws {
        workspace = try TestWorkspace()
    }

    func makeManager() throws -> DownloadManager {
        try DownloadManager(configuration: .forTests(directory: directory, retryLimit: 0))
    }

    @Test("The identifier is 32 hex digits, the same with or without credentials and after a restart; look-ups find it")
    func identifiers() async throws {
        let url = server.url("/bytes/ident?size=2000")
        var withUser = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        withUser.user = "me"
        withUser.password = "secret"
        let manager = try makeManager()
        let receipt = try await manager.download(url)
        #expect(receipt.identifier.count == 32)
        #expect(receipt.identifier.allSatisfy { $0.isHexDigit && !$0.isUppercase })
        #expect(DownloadReceipt(url: withUser.url!, filename: "", fileURL: url).identifier == receipt.identifier)
        #expect(
            DownloadReceipt(url: server.url("/bytes/other?size=2000"), filename: "", fileURL: url).identifier
                != receipt.identifier)
        #expect(await manager.receipt(identifiedBy: receipt.identifier)?.url == url)
        #expect(await manager.receipt(identifiedBy: String(repeating: "0", count: 32)) == nil)
        await manager.shutdown()

        let again = try makeManager()
        #expect(await again.receipt(identifiedBy: receipt.identifier)?.state == .completed, "after a restart")
        await again.remove(url)
        #expect(await again.receipt(identifiedBy: receipt.identifier) == nil, "removed")
        await again.shutdown()
    }

    @Test(
        "A service answers by identifier: the expected checksum kept across restarts, control by id, the completed area (issue #48)"
    )
    func serviceByIdentifier() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/byid?size=200000&stallAfter=60000&stall=60&stallCount=1")
        let expected = try #require(Checksum(md5: TestContent(name: "byid", size: 200_000).md5.hexString))
        let receipt = await manager.enqueue(url, options: DownloadOptions(checksum: expected))
        let id = receipt.identifier
        #expect(receipt.expectedChecksum == expected)
        #expect(
            manager.completedDirectory.standardizedFileURL.path == directory.appendingPathComponent("completed").path)
        #expect(await server.waitUntil { $0.stallsBegun >= 1 })
        #expect(await manager.suspend(identifiedBy: id))
        #expect(await !manager.suspend(identifiedBy: String(repeating: "0", count: 32)), "an unknown id is said")
        #expect(await manager.snapshot(identifiedBy: id)?.expectedChecksum == expected.description)
        await manager.shutdown()

        let again = try makeManager()
        #expect(await again.receipt(identifiedBy: id)?.expectedChecksum == expected, "kept across a restart")
        #expect(await again.receipt(identifiedBy: id)?.state == .suspended)
        #expect(await again.resume(identifiedBy: id))
        let done = try await again.download(url)
        #expect(done.expectedChecksum == expected && done.verification == .checksum(expected))
        #expect(await again.forget(identifiedBy: id))
        #expect(await again.receipt(identifiedBy: id) == nil)
        #expect(FileManager.default.fileExists(atPath: done.fileURL.path), "forget keeps the file")
        let other = try await again.download(server.url("/bytes/byid2?size=1000"))
        #expect(await again.remove(identifiedBy: other.identifier))
        await again.waitUntilQuiet()  // files are deleted off the actor
        #expect(!FileManager.default.fileExists(atPath: other.fileURL.path), "remove deletes it")
        #expect(await !again.remove(identifiedBy: other.identifier), "gone")
        await again.shutdown()
    }

    @Test("A snapshot's JSON: state, bytes, a path relative to the completed area, the error's kind; no secret")
    func snapshotJSON() async throws {
        let manager = try makeManager()
        let completedArea = directory.appendingPathComponent("completed")
        let destination = completedArea.appendingPathComponent("2026/report.bin")
        let good = server.url("/bytes/report?size=3000")
        let receipt = try await manager.download(good, options: DownloadOptions(destination: destination))
        let snapshot = try #require(await manager.snapshot(identifiedBy: receipt.identifier))
        #expect(snapshot.id == receipt.identifier && snapshot.state == .completed)
        #expect(snapshot.bytesWritten == 3000 && snapshot.bytesExpected == 3000 && snapshot.fractionCompleted == 1)
        #expect(snapshot.path == "2026/report.bin")
        #expect(snapshot.checksum == "md5=\(TestContent(name: "report", size: 3000).md5.hexString)")
        #expect(snapshot.failure == nil)

        var missing = URLComponents(url: server.url("/status/404?snap=1"), resolvingAgainstBaseURL: false)!
        missing.user = "me"
        missing.password = "hunter2"
        await #expect(throws: DownloadError.httpStatus) { try await manager.download(missing.url!) }
        let failed = try #require(await manager.snapshot(for: missing.url!))
        #expect(failed.state == .failed && failed.path == nil)
        #expect(failed.failure?.kind == "httpStatus" && failed.failure?.statusCode == 404)
        #expect(failed.url == server.url("/status/404?snap=1"), "no credentials")

        let page = await manager.snapshots(after: nil, limit: 10)
        #expect(page.snapshots.map(\.id) == [snapshot.id, failed.id] && page.next == nil)
        let json = String(decoding: try JSONEncoder().encode(page.snapshots), as: UTF8.self)
        #expect(!json.contains("hunter2") && !json.contains(directory.path), "\(json)")
        for key in ["\"id\"", "\"state\"", "\"bytesWritten\"", "\"bytesExpected\"", "\"path\"", "\"kind\""] {
            #expect(json.contains(key), "\(key) in \(json)")
        }
        #expect(try JSONDecoder().decode([DownloadSnapshot].self, from: Data(json.utf8)) == page.snapshots)
        await manager.shutdown()
    }

    @Test("DownloadError.kind is the name of the static member the error equals")
    func errorKinds() {
        let kinds: [(DownloadError, String)] = [
            (.invalidURL, "invalidURL"), (.httpStatus, "httpStatus"), (.checksumMismatch, "checksumMismatch"),
            (.stalled, "stalled"), (.fileSystem, "fileSystem"), (.suspended, "suspended"),
            (.requestPreparationFailed, "requestPreparationFailed"), (.directoryLocked, "directoryLocked"),
        ]
        for (error, name) in kinds { #expect(error.kind == name) }
    }
}
