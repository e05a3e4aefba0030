import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// A receipt's file and name, made only when read for a new download (issue #52), read, compared, hashed and coded
/// as the stored pair they replaced.
@Suite("ReceiptFile")
final class ReceiptFileTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }

    init() throws {
        workspace = try TestWorkspace()
    }

    static let directory = DownloadDirectory(root: URL(fileURLWithPath: "/srv/downloads"))
    static let urls = [
        "http://example.com/a/report.pdf", "http://example.com/", "http://example.com/x?y=z",
        "http://example.com/archive.tar.gz", "http://example.com/%E2%9C%93.bin",
        "http://example.com/a.verylongextension1",
    ].map { URL(string: $0)! }

    /// The file and name the receipt of a new download had when both were stored.
    static func eager(_ url: URL) -> ReceiptFile {
        let key = DownloadDirectory.key(for: url)
        return ReceiptFile(
            url: directory.partialFile(key: key), name: DownloadDirectory.defaultFilename(for: url, key: key))
    }

    static func lazy(_ url: URL) -> ReceiptFile {
        directory.receiptFile(key: DownloadDirectory.key(for: url), url: url)
    }

    @Test("A new download's file and name read as the stored pair did: its partial file, its key and extension")
    func readsAsStored() {
        // The names spelled out: `eager` uses the same recipe (`URL.downloadFilename(key:)`), so it alone would not
        // tell a wrong name.
        let extensions = [".pdf", "", "", ".gz", ".bin", ""]
        for (url, ext) in zip(Self.urls, extensions) {
            let lazy = Self.lazy(url)
            let eager = Self.eager(url)
            #expect(lazy.url == eager.url && lazy.name == eager.name, "\(url)")
            #expect(lazy.url.path == "/srv/downloads/.downloader/partial/\(url.downloadIdentifier).part")
            #expect(lazy.name == url.downloadIdentifier + ext, "\(url)")
        }
    }

    @Test("Equal however made: a made-when-read file equals the stored pair it reads as, with the same hash")
    func equalityAcrossRecipes() {
        for url in Self.urls {
            let lazy = Self.lazy(url)
            #expect(lazy == Self.eager(url) && Self.eager(url) == lazy)
            #expect(lazy.hashValue == Self.eager(url).hashValue)
            #expect(Set([lazy, Self.eager(url)]).count == 1)
            #expect(lazy == Self.lazy(url))
        }
        let (first, second) = (Self.urls[0], Self.urls[2])
        #expect(Self.lazy(first) != Self.lazy(second))
        #expect(Self.lazy(first) != Self.eager(second))
        let sameFileOtherName = ReceiptFile(url: Self.eager(first).url, name: "other")
        #expect(Self.lazy(first) != sameFileOtherName)
        let sameNameOtherFile = ReceiptFile(url: URL(fileURLWithPath: "/elsewhere"), name: Self.eager(first).name)
        #expect(Self.lazy(first) != sameNameOtherFile)
    }

    @Test("Setting the file or the name of a receipt keeps the other as it read")
    func settersKeepTheOther() {
        for url in Self.urls {
            let eager = Self.eager(url)
            var receipt = DownloadReceipt(url: url, file: Self.lazy(url))
            receipt.fileURL = URL(fileURLWithPath: "/srv/downloads/completed/done.bin")
            #expect(receipt.filename == eager.name)
            receipt = DownloadReceipt(url: url, file: Self.lazy(url))
            receipt.filename = "done.bin"
            #expect(receipt.fileURL == eager.url && receipt.filename == "done.bin")
        }
    }

    @Test("A receipt codes as before: the same JSON as the stored pair, decoded equal, and found in a set by either")
    func codingAndHashing() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        for url in Self.urls {
            let lazy = DownloadReceipt(url: url, file: Self.lazy(url), state: .queued, totalBytesWritten: 7)
            let eager = Self.eager(url)
            let stored = DownloadReceipt(
                url: url, filename: eager.name, fileURL: eager.url, state: .queued, totalBytesWritten: 7)
            #expect(try encoder.encode(lazy) == encoder.encode(stored))
            let decoded = try JSONDecoder().decode(DownloadReceipt.self, from: encoder.encode(lazy))
            #expect(decoded == lazy && lazy == stored)
            #expect(Set([stored]).contains(lazy) && Set([lazy]).contains(decoded))
            #expect(lazy.description == stored.description)
            var other = lazy
            other.totalBytesWritten = 8
            #expect(other != stored, "the other fields still count")
        }
    }

    @Test("A queued download's receipt names its partial file and KEY.ext; once complete, the delivered file")
    func managerReceiptBeforeAndAfter() async throws {
        let directory = workspace.directory.appendingPathComponent("files")
        let manager = try DownloadManager(configuration: .forTests(directory: directory, maximumActive: 1))
        let held = server.url("/bytes/held?size=1000&gate=held&gateSize=2")
        let queued = server.url("/bytes/queued.iso?size=2000")
        _ = await manager.enqueue(held)
        let receipt = await manager.enqueue(queued)
        let key = DownloadDirectory.key(for: queued)
        let partial = DownloadDirectory(root: directory).partialFile(key: key)
        #expect(receipt.state == .queued)
        #expect(receipt.fileURL == partial && receipt.filename == "\(key).iso")
        #expect(await manager.receipt(for: queued) == receipt)
        server.openGate("held")
        let done = try await manager.download(queued)
        #expect(done.fileURL.lastPathComponent == "queued.iso" && done.filename == "queued.iso")
        #expect(try md5OfFile(done.fileURL) == TestContent(name: "queued.iso", size: 2000).md5)
        #expect(await manager.receipt(for: queued) == done)
        await manager.shutdown()
    }

    @Test("After a restart, a download without its file names its partial file and KEY.ext as before")
    func restoredReceipt() async throws {
        let directory = workspace.directory.appendingPathComponent("restart")
        let url = server.url("/bytes/paused.tar?size=3000&gate=paused&gateSize=2")
        let first = try DownloadManager(configuration: .forTests(directory: directory))
        _ = await first.enqueue(url)
        await first.suspend(url)
        await first.shutdown()
        let second = try DownloadManager(configuration: .forTests(directory: directory))
        let receipt = try #require(await second.receipt(for: url))
        let key = DownloadDirectory.key(for: url)
        #expect(receipt.state == .suspended)
        #expect(receipt.fileURL == DownloadDirectory(root: directory).partialFile(key: key))
        #expect(receipt.filename == "\(key).tar")
        await second.shutdown()
        server.openGate("paused")
    }
}
