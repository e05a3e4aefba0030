import Downloader
import Foundation
import HTTPTestServer
import Testing

/// The library as a dependent sees it: `import Downloader` without `@testable`, so that everything here is public API
/// (issue #51). A name made internal, or a type a public signature leaks without making public, fails to compile.
@Suite("Public API")
final class PublicAPITests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }

    init() throws {
        workspace = try TestWorkspace(prefix: "public-api")
    }

    func makeManager() async throws -> DownloadManager {
        var configuration = DownloadManager.Configuration(directory: workspace.directory)
        configuration.maximumActiveDownloads = 2
        configuration.retryLimit = 0
        return try await DownloadManager.make(configuration: configuration)
    }

    @Test("download with a checksum, events, snapshots, receipts by page, forget by identifier, refusal after shutdown")
    func downloadAndInspect() async throws {
        let manager = try await makeManager()
        let url = server.url("/bytes/api.bin?size=200000")
        let md5 = TestContent(name: "api.bin", size: 200_000).md5.hexString
        let checksum = try #require(Checksum(md5: md5))
        let events = await manager.events(for: url)
        let receipt = try await manager.download(url, options: DownloadOptions(checksum: checksum))
        #expect(receipt.state == .completed && receipt.checksum == checksum)
        #expect(receipt.fileURL.lastPathComponent == "api.bin" && receipt.totalBytesWritten == 200_000)
        var states: [DownloadState] = []
        for await event in events {
            if case .stateChanged(let changed) = event { states.append(changed.state) }
        }
        #expect(states.last == .completed, "\(states)")
        let snapshot = try #require(await manager.snapshot(for: url))
        #expect(snapshot.state == .completed && snapshot.checksum == checksum.description)
        let page = await manager.receipts(after: nil, limit: 10)
        #expect(page.receipts.map(\.url) == [url] && page.next == nil)
        #expect(await manager.refusal(ofRequestFor: url) == nil)
        #expect(await manager.forget(identifiedBy: receipt.identifier))
        #expect(await manager.receipt(for: url) == nil)
        #expect(FileManager.default.fileExists(atPath: receipt.fileURL.path), "forget keeps the file")
        await manager.shutdown()
        #expect(await manager.refusal(ofRequestFor: url) == .shutDown)
        await #expect(throws: DownloadError.shutDown) { try await manager.download(url) }
    }

    @Test("A 16 KiB first request when asked; a state folder read without a manager, as dl --list reads it")
    func firstWindowAndSavedDownloads() async throws {
        var configuration = DownloadManager.Configuration(directory: workspace.directory)
        #expect(configuration.asksWholeFirstWindow)
        configuration.asksWholeFirstWindow = false
        #expect(!configuration.asksWholeFirstWindow)
        let manager = try await DownloadManager.make(configuration: configuration)
        let url = server.url("/bytes/saved.bin?size=100000")
        _ = try await manager.download(url)
        let gets = server.requests.filter { $0.path == "/bytes/saved.bin" && $0.method == "GET" }
        #expect(gets.first?.range == "bytes=0-16383", "\(gets.map(\.range))")
        await manager.shutdown()
        let state = workspace.directory.appendingPathComponent(".downloader")
        let (downloads, inUse) = DownloadManager.savedDownloads(in: state)
        #expect(!inUse)
        let saved = try #require(downloads.first)
        #expect(downloads.count == 1 && saved.url == url && saved.state == .completed && saved.name == "saved.bin")
        #expect(saved.bytesOnDisk == 100_000 && saved.totalBytes == 100_000)
    }

    @Test("enqueue with a completion, suspend and resume by identifier, a wrong checksum's clear error")
    func enqueueAndControl() async throws {
        let manager = try await makeManager()
        let url = server.url("/bytes/held-api?size=100000&gate=api&gateSize=1000")
        let done = Locked<Result<DownloadReceipt, DownloadError>?>(nil)
        let receipt = await manager.enqueue(url, completion: { result in done.withLock { $0 = result } })
        #expect(await server.waitUntil { $0.requests.contains { $0.path == "/bytes/held-api" } })
        #expect(await manager.suspend(identifiedBy: receipt.identifier))
        #expect(await manager.receipt(for: url)?.state == .suspended)
        server.openGate("api")
        #expect(await manager.resume(identifiedBy: receipt.identifier))
        let deadline = TestTime.deadline(in: .seconds(60))
        while done.withLock({ $0 }) == nil && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))  // a deadline, not synchronisation
        }
        guard case .success(let finished)? = done.withLock({ $0 }) else {
            Issue.record("no success: \(String(describing: done.withLock { $0 }))")
            return
        }
        #expect(finished.state == .completed)
        let wrong = try #require(Checksum(md5: String(repeating: "0", count: 32)))
        let error = await #expect(throws: DownloadError.self) {
            try await manager.download(
                self.server.url("/bytes/wrong-api?size=1000"), options: DownloadOptions(checksum: wrong))
        }
        #expect(error == .checksumMismatch, "\(String(describing: error))")
        await manager.shutdown()
    }
}
