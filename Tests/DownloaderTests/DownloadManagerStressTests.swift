import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

@Suite("DownloadManager stress")
struct DownloadManagerStressTests {
    @Test(
        "200 downloads with random suspend, resume, remove and duplicates from 16 tasks end verified, with no stray files"
    )
    func randomOperations() async throws {
        let workspace = try TestWorkspace()
        defer { withExtendedLifetime(workspace) {} }  // its deinit stops the server: keep it to the end
        let server = workspace.server
        let temporary = TemporaryDirectory(existing: workspace.directory)
        let manager = try DownloadManager(
            configuration: .forTests(directory: temporary.url, maximumActive: 8, window: 32_768))

        var sizes = SeededGenerator(seed: 1)
        let contents = (0..<200).map {
            TestContent(name: "s\($0)", size: Int.random(in: 1_000...120_000, using: &sizes))
        }
        let urls = contents.map { server.url("/bytes/\($0.name)?size=\($0.size)&rate=2000000") }

        let deadline = TestTime.deadline(in: .seconds(300))  // a bound, not a pace: ThreadSanitizer runs are slow
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<16 {
                group.addTask {
                    var random = SeededGenerator(seed: UInt64(100 + worker))
                    for _ in 0..<60 {
                        let url = urls.randomElement(using: &random)!
                        switch Int.random(in: 0..<10, using: &random) {
                        case 0..<4: await manager.enqueue(url)
                        case 4..<6: await manager.suspend(url)
                        case 6..<8: await manager.resume(url)
                        case 8: await manager.remove(url)
                        default: await manager.enqueue(url)  // a duplicate of a likely running one
                        }
                        if Int.random(in: 0..<4, using: &random) == 0 { await Task.yield() }
                    }
                }
            }
        }
        // Everything still known must now finish: resume and join each one.
        let survivors = await manager.allReceipts.map(\.url)
        #expect(!survivors.isEmpty && survivors.count < urls.count, "some downloads were removed and some survived")
        let finished = try await withThrowingTaskGroup(of: DownloadReceipt?.self) { group in
            for url in survivors { group.addTask { try await manager.download(url) } }
            group.addTask {
                try await Task.sleep(until: deadline)
                return nil
            }
            var receipts: [DownloadReceipt] = []
            for try await receipt in group {
                guard let receipt else { break }
                receipts.append(receipt)
                if receipts.count == survivors.count { break }
            }
            group.cancelAll()
            return receipts
        }
        #expect(finished.count == survivors.count, "bounded time: all survivors finished before the deadline")
        await manager.waitUntilQuiet()

        let byURL = Dictionary(uniqueKeysWithValues: zip(urls, contents))
        for receipt in finished {
            let content = try #require(byURL[receipt.url])
            #expect(receipt.state == .completed)
            #expect(receipt.md5 == content.md5.hexString)
            #expect(try md5OfFile(receipt.fileURL) == content.md5)
        }
        let expectedFiles = Set(finished.map { "completed/" + $0.fileURL.lastPathComponent })
        let files = Set(temporary.files().filter { $0 != ".downloader/journal" && $0 != ".downloader/lock" })
        let stray = files.subtracting(expectedFiles)
        let missing = expectedFiles.subtracting(files)
        #expect(stray.isEmpty && missing.isEmpty, "stray: \(stray.sorted()), missing: \(missing.sorted())")
        #expect(server.statistics.peakActiveRequests <= 8)
        await manager.shutdown()
    }
}
