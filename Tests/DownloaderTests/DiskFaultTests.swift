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
        "A full disk fails its download with a clear write error; the others are unaffected, and removing it frees the room",
        .enabled(if: SmallDisk.isAvailable))
    func fullDisk() async throws {
        let disk = try SmallDisk(at: temporary.url.appendingPathComponent("full-disk"), size: "1m")
        let root = disk.url
        var configuration = DownloadManager.Configuration.forTests(directory: root)
        configuration.retryLimit = 0
        let manager = try DownloadManager(configuration: configuration)
        let fine = (0..<3).map { server.url("/bytes/fine\($0)?size=100000") }
        for (index, url) in fine.enumerated() {
            let receipt = try await manager.download(url)
            #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "fine\(index)", size: 100_000).md5)
        }
        // Without a length nothing can be checked before: the write itself fails (`freeSpaceCheckedFirst` has one).
        let full = server.url("/bytes/full?size=3000000&length=none&norange=1")
        await #expect(throws: DownloadError.fileSystem) { try await manager.download(full) }
        let failed = try #require(await manager.receipt(for: full))
        // The body's write ("writing <partial file> failed: …") or, when the hash queue's checkpoint comes first, the
        // state's ("cannot save the transfer state …: …"): both name the write and the full disk. Once (stop 60, at
        // load 9) the reason did not contain "writing"; the other wording is as clear.
        let reason = failed.error?.reason ?? "no error"
        #expect(
            failed.state == .failed && reason.contains("No space left on device")
                && (reason.contains("writing") || reason.contains("cannot save the transfer state")),
            "\(failed): \(reason)")
        await manager.remove(full)
        await manager.waitUntilQuiet()
        let after = try await manager.download(server.url("/bytes/after?size=100000"))
        #expect(try md5OfFile(after.fileURL) == TestContent(name: "after", size: 100_000).md5)
        await manager.shutdown()
    }

    @Test(
        "A download with a length larger than the free space fails at once, saying so (d1ecfd3: ENOSPC after 1 MB)",
        .enabled(if: SmallDisk.isAvailable))
    func freeSpaceCheckedFirst() async throws {
        let disk = try SmallDisk(at: temporary.url.appendingPathComponent("small"), size: "1m")
        var configuration = DownloadManager.Configuration.forTests(directory: disk.url)
        configuration.retryLimit = 0
        let manager = try DownloadManager(configuration: configuration)
        let url = server.url("/bytes/toobig?size=3000000")
        let error = await #expect(throws: DownloadError.self) { try await manager.download(url) }
        #expect(error == .fileSystem && error?.reason.contains("not enough free space") == true, "\(error!)")
        // Binary sizes in binary units (issue #48): "2.9 MiB", never "MB".
        #expect(error?.reason.contains("MiB") == true && error?.reason.contains(" MB") == false, "\(error!)")
        #expect(server.statistics.bodyBytesSent < 1 << 20, "stopped before filling the disk")
        // What fits still downloads.
        let fits = try await manager.download(server.url("/bytes/fits?size=100000"))
        #expect(try md5OfFile(fits.fileURL) == TestContent(name: "fits", size: 100_000).md5)
        await manager.shutdown()
    }

    @Test(
        "A completed area that stops being writable mid-download fails clearly, keeps the bytes, and completes later without refetching"
    )
    func completedAreaNotWritable() async throws {
        let manager = try makeManager()
        // The body pauses after 100 KB until the test has blocked the completed area (a pause of 1 s once let a loaded
        // machine's test come too late: the file was placed first).
        let url = server.url("/bytes/blocked?size=300000&stallAfter=100000&stallGate=blocked&stallCount=2")
        let download = Task { try await manager.download(url) }
        #expect(await server.waitUntil { $0.stallsBegun >= 1 })
        // The transfer is under way: now the completed area turns into something nobody can write into.
        let completed = temporary.url.appendingPathComponent("completed")
        try FileManager.default.removeItem(at: completed)
        try Data("not a directory".utf8).write(to: completed)
        server.openGate("blocked")
        await #expect(throws: DownloadError.fileSystem) { try await download.value }
        #expect(fileSize(DownloadDirectory(root: temporary.url).partialFile(for: url)) == 300_000)

        try FileManager.default.removeItem(at: completed)
        try FileManager.default.createDirectory(at: completed, withIntermediateDirectories: false)
        let gets = server.requests.filter { $0.method == "GET" }.count
        let receipt = try await manager.download(url)
        #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "blocked", size: 300_000).md5)
        #expect(server.requests.filter { $0.method == "GET" }.count == gets, "the whole partial file was reused")
    }

    @Test(
        "A full disk: the download fails clearly, saving the receipts fails and is reported; once there is room again the save is retried and everything completes",
        .enabled(if: SmallDisk.isAvailable))
    func fullDiskRecovers() async throws {
        let disk = try SmallDisk(at: temporary.url.appendingPathComponent("small-disk"), size: "2m")
        let root = disk.url
        var configuration = DownloadManager.Configuration.forTests(directory: root)
        configuration.retryLimit = 0
        let manager = try DownloadManager(configuration: configuration)
        let events = await manager.events()
        try disk.fill()
        let filler = root.appendingPathComponent("filler")

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
        .enabled(if: SmallDisk.isAvailable))
    func receiptsNotSavable() async throws {
        // The state folder is a small disk, full before the journal has its first page (an append inside a page it
        // already has would still succeed); its partial area is a second, roomy one, so that downloads go on.
        let stateDisk = try SmallDisk(at: temporary.url.appendingPathComponent(".downloader"), size: "64k")
        let partialDisk = try SmallDisk(at: stateDisk.url.appendingPathComponent("partial"), size: "4m")
        defer {
            partialDisk.unmount()
            stateDisk.unmount()
        }
        try stateDisk.fill()
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

    @Test(
        "Segments after a full disk: the saved state lists what is on disk, and the rerun fetches only the rest",
        .enabled(if: SmallDisk.isAvailable))
    func segmentsAfterFullDisk() async throws {
        let disk = try SmallDisk(at: temporary.url.appendingPathComponent("segments-disk"), size: "3m")
        var configuration = DownloadManager.Configuration.forTests(directory: disk.url, retryLimit: 0, window: 1 << 20)
        configuration.connectionsPerDownload = 4
        configuration.minimumSegmentSize = 128 << 10
        configuration.checksFreeSpace = false  // the disk fills up during the download (another process's files)
        let manager = try DownloadManager(configuration: configuration)
        let url = server.url("/bytes/segfull?size=6000000")
        let content = TestContent(name: "segfull", size: 6_000_000)
        await #expect(throws: DownloadError.fileSystem) { try await manager.download(url) }
        await manager.shutdown()

        let directory = DownloadDirectory(root: disk.url)
        let state = try #require(directory.savedState(for: url), "the failed run saved its state")
        let listed = [0..<state.hashedLength] + (state.segments ?? [])
        let listedBytes = listed.reduce(Int64(0)) { $0 + Int64($1.count) }
        // Every listed byte is on disk and right.
        let partial = try Data(contentsOf: directory.partialFile(for: url))
        for range in listed where !range.isEmpty {
            #expect(range.upperBound <= Int64(partial.count))
            #expect(
                partial[Int(range.lowerBound)..<Int(range.upperBound)]
                    == content.data[Int(range.lowerBound)..<Int(range.upperBound)], "\(range)")
        }
        // And what is on disk is listed, but for the pages each connection had in flight when the disk filled.
        let allocated = try allocatedBytes(directory.partialFile(for: url))
        #expect(listedBytes >= allocated - 4 * (256 << 10), "listed \(listedBytes), on disk \(allocated)")

        #expect(SmallDisk.run("/bin/mount", "-o", "remount,size=16m", disk.url.path) == 0)
        server.resetStatistics()
        let again = try DownloadManager(configuration: configuration)
        let receipt = try await again.download(url)
        #expect(try md5OfFile(receipt.fileURL) == content.md5)
        let fetched = server.statistics.bodyBytesSent
        #expect(fetched <= 6_000_000 - listedBytes + 4 * (1 << 20), "fetched \(fetched), listed \(listedBytes)")
        await again.shutdown()
    }

    /// The bytes a file's blocks hold on disk (a sparse file's holes are not counted).
    func allocatedBytes(_ file: URL) throws -> Int64 {
        var status = stat()
        guard stat(file.path, &status) == 0 else { throw POSIXError(.ENOENT) }
        return Int64(status.st_blocks) * 512
    }
}
