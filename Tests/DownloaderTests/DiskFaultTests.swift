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
        let url = server.url("/bytes/blocked?size=300000&stallAfter=100000&stall=1&stallCount=2")
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

    /// Whether this machine lets the tests mount a tmpfs (root in a sandbox that allows it).
    static let canMountTmpfs: Bool = {
        let point = FileManager.default.temporaryDirectory.appendingPathComponent("mount-probe-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: point, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: point) }
        guard run("/bin/mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", point.path) == 0 else { return false }
        return run("/bin/umount", point.path) == 0
    }()

    @discardableResult
    static func run(_ tool: String, _ arguments: String...) -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return -1 }
        process.waitUntilExit()
        return process.terminationStatus
    }

    @Test(
        "A full disk: the download fails clearly, saving the receipts fails and is reported; once there is room again the save is retried and everything completes",
        .enabled(if: canMountTmpfs))
    func fullDiskRecovers() async throws {
        let root = temporary.url.appendingPathComponent("small-disk")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        #expect(Self.run("/bin/mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", root.path) == 0)
        defer { Self.run("/bin/umount", "-l", root.path) }
        var configuration = DownloadManager.Configuration.forTests(directory: root)
        configuration.retryLimit = 0
        let manager = try DownloadManager(configuration: configuration)
        let events = await manager.events()
        // Fill the disk to the last byte.
        let filler = root.appendingPathComponent("filler")
        _ = FileManager.default.createFile(atPath: filler.path, contents: nil)
        let handle = try FileHandle(forWritingTo: filler)
        let block = Data(count: 4096)
        while (try? handle.write(contentsOf: block)) != nil {}
        try? handle.close()

        let url = server.url("/bytes/nospace?size=300000")
        await #expect(throws: DownloadError.fileSystem) { try await manager.download(url) }
        await manager.saveReceiptsNow()
        #expect(manager.receiptsSaveError == .fileSystem)
        let failed = await firstEvent(in: events) { if case .receiptsSaveFailed = $0 { true } else { false } }
        #expect(failed != nil, "the failed save was reported as an event")

        try FileManager.default.removeItem(at: filler)
        let saved = await firstEvent(in: events) { if case .receiptsSaved = $0 { true } else { false } }
        #expect(saved != nil && manager.receiptsSaveError == nil, "the save was retried once there was room")
        let receipt = try await manager.download(url)
        #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "nospace", size: 300_000).md5)
        await manager.shutdown()

        let again = try DownloadManager(configuration: configuration)
        let gets = server.requests.filter { $0.method == "GET" }.count
        #expect(try await again.download(url) == receipt)
        #expect(server.requests.filter { $0.method == "GET" }.count == gets, "known after a restart: not fetched again")
        await again.shutdown()
    }

    @Test("A directory that cannot be created is a clear error at start")
    func directoryNotCreatable() throws {
        let blocker = temporary.url.appendingPathComponent("file")
        try Data("x".utf8).write(to: blocker)
        #expect(throws: DownloadError.fileSystem) {
            try DownloadManager(configuration: .init(directory: blocker.appendingPathComponent("downloads")))
        }
    }

    @Test("A journal line torn by a crash is dropped; every earlier line and every verified file is kept")
    func tornJournal() async throws {
        let first = try makeManager()
        let kept = try await first.download(server.url("/bytes/kept?size=50000"))
        let torn = try await first.download(server.url("/bytes/torn?size=50000"))
        await first.shutdown()
        let journal = temporary.url.appendingPathComponent(".downloader/journal")
        let data = try Data(contentsOf: journal)
        try data.dropLast(10).write(to: journal)  // the last line loses its end, as a crash mid-write leaves it

        let second = try makeManager()
        #expect(second.receiptsRecoveryError == nil, "a torn last line is what a crash leaves: not an error")
        #expect(await second.receipt(for: kept.url) == kept)
        #expect(try md5OfFile(torn.fileURL) == TestContent(name: "torn", size: 50_000).md5)
        let gets = server.requests.filter { $0.method == "GET" }.count
        let again = try await second.download(server.url("/bytes/kept?size=50000"))
        #expect(again == kept && server.requests.filter { $0.method == "GET" }.count == gets)
        await second.shutdown()
    }

    @Test(
        "Receipts that cannot be saved are reported (error and event) while downloads go on",
        .enabled(if: FileManager.default.fileExists(atPath: "/dev/full")))
    func receiptsNotSavable() async throws {
        let state = temporary.url.appendingPathComponent(".downloader")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            at: state.appendingPathComponent("journal"), withDestinationURL: URL(fileURLWithPath: "/dev/full"))
        let manager = try makeManager()
        let events = await manager.events()
        let receipt = try await manager.download(server.url("/bytes/unsaved?size=10000"))
        #expect(receipt.state == .completed)
        await manager.saveReceiptsNow()
        #expect(manager.receiptsSaveError == .fileSystem)
        #expect(manager.receiptsSaveError?.reason.contains("cannot save the receipts") == true)
        let reported = await firstEvent(in: events) { event in
            if case .receiptsSaveFailed(let error) = event { return error == .fileSystem }
            return false
        }
        #expect(reported != nil)
        await manager.shutdown()
    }
}
