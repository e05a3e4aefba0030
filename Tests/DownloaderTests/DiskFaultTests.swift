import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

@Suite("Disk faults")
final class DiskFaultTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var temporary: TemporaryDirectory { TemporaryDirectory(existing: workspace.directory) }

    init() throws {
        workspace = try TestWorkspace()
    }

    func makeManager() throws -> DownloadManager {
        var configuration = DownloadManager.Configuration(directory: temporary.url)
        configuration.retryBaseDelay = 0.01
        return try DownloadManager(configuration: configuration)
    }

    @Test(
        "A full disk fails its download with a file-system error while the others complete verified",
        .enabled(if: FileManager.default.fileExists(atPath: "/dev/full")))
    func fullDisk() async throws {
        let manager = try makeManager()
        let full = server.url("/bytes/full?size=300000")
        try FileManager.default.createSymbolicLink(
            at: DownloadDirectory(root: temporary.url).partialFile(for: full),
            withDestinationURL: URL(fileURLWithPath: "/dev/full"))
        let fine = (0..<3).map { server.url("/bytes/fine\($0)?size=300000") }
        await manager.enqueue(full)
        for url in fine { await manager.enqueue(url) }
        await #expect(throws: DownloadError.fileSystem) { try await manager.download(full) }
        for (index, url) in fine.enumerated() {
            let receipt = try await manager.download(url)
            #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "fine\(index)", size: 300_000).md5)
        }
        let failed = try #require(await manager.receipt(for: full))
        #expect(failed.state == .failed && failed.error?.reason.contains("writing") == true)
    }

    @Test(
        "A completed area that stops being writable mid-download fails clearly, keeps the bytes, and completes later without refetching"
    )
    func completedAreaNotWritable() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/blocked?size=300000&stallAfter=100000&stall=1&stallCount=1")
        let download = Task { try await manager.download(url) }
        #expect(await server.waitUntil { $0.bodyBytesSent >= 100_000 })
        // The transfer is under way: now the completed area turns into something nobody can write into.
        let completed = temporary.url.appendingPathComponent("completed")
        try FileManager.default.removeItem(at: completed)
        try Data("not a directory".utf8).write(to: completed)
        await #expect(throws: DownloadError.fileSystem) { try await download.value }
        #expect(fileSize(DownloadDirectory(root: temporary.url).partialFile(for: url)) == 300_000)

        try FileManager.default.removeItem(at: completed)
        try FileManager.default.createDirectory(at: completed, withIntermediateDirectories: false)
        let gets = server.requests.filter { $0.method == "GET" }.count
        let receipt = try await manager.download(url)
        #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "blocked", size: 300_000).md5)
        #expect(server.requests.filter { $0.method == "GET" }.count == gets, "the whole partial file was reused")
    }

    @Test("A directory that cannot be created is a clear error at start")
    func directoryNotCreatable() throws {
        let blocker = temporary.url.appendingPathComponent("file")
        try Data("x".utf8).write(to: blocker)
        #expect(throws: DownloadError.fileSystem) {
            try DownloadManager(configuration: .init(directory: blocker.appendingPathComponent("downloads")))
        }
    }

    @Test("A truncated receipts file is moved aside and verified files are kept")
    func truncatedReceipts() async throws {
        let first = try makeManager()
        let receipt = try await first.download(server.url("/bytes/kept?size=50000"))
        await first.shutdown()
        let receipts = temporary.url.appendingPathComponent("receipts.json")
        let data = try Data(contentsOf: receipts)
        try data.prefix(data.count / 2).write(to: receipts)

        let second = try makeManager()
        #expect(second.receiptsRecoveryError == .corruptReceipts)
        #expect(await second.allReceipts.isEmpty)
        #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "kept", size: 50_000).md5)
        let again = try await second.download(server.url("/bytes/kept?size=50000"))
        #expect(again.state == .completed)
    }

    @Test("Receipts that cannot be saved are reported while downloads go on")
    func receiptsNotSavable() async throws {
        let manager = try makeManager()
        try FileManager.default.createDirectory(
            at: temporary.url.appendingPathComponent("receipts.json/blocked"), withIntermediateDirectories: true)
        let receipt = try await manager.download(server.url("/bytes/unsaved?size=10000"))
        #expect(receipt.state == .completed)
        await manager.saveReceiptsNow()
        #expect(manager.receiptsSaveError == .fileSystem)
    }
}
