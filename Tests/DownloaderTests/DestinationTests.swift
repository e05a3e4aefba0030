import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// `DownloadOptions.destination`: an exact path, replaced only by a verified file, known after a restart.
@Suite("Destination")
final class DestinationTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var temporary: TemporaryDirectory { TemporaryDirectory(existing: workspace.directory) }

    init() throws {
        workspace = try TestWorkspace()
    }

    func makeManager() throws -> DownloadManager {
        try DownloadManager(configuration: .forTests(directory: temporary.url.appendingPathComponent("manager")))
    }

    @Test("The file lands at the exact path, its folders created, and is known there after a restart")
    func exactPath() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/exact?size=70000&filename=ignored.bin")
        let target = temporary.url.appendingPathComponent("deep/er/file.iso")
        let receipt = try await manager.download(url, options: DownloadOptions(destination: target))
        #expect(receipt.fileURL == target.standardizedFileURL && receipt.filename == "file.iso")
        #expect(try md5OfFile(target) == TestContent(name: "exact", size: 70000).md5)
        await manager.shutdown()

        let reopened = try makeManager()
        let known = try #require(await reopened.receipt(for: url))
        #expect(known.state == .completed && known.fileURL == target.standardizedFileURL)
        let before = server.requests.count
        _ = try await reopened.download(url, options: DownloadOptions(destination: target))
        #expect(server.requests.count == before, "answered from the receipt")
        await reopened.shutdown()
    }

    @Test("A file already at the destination is replaced only by a verified one")
    func replacedOnlyWhenVerified() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/over?size=50000")
        let target = temporary.url.appendingPathComponent("over.bin")
        try Data("the user's old file".utf8).write(to: target)
        let wrong = try Checksum(parsing: String(repeating: "0", count: 64))
        await #expect(throws: DownloadError.checksumMismatch) {
            try await manager.download(url, options: DownloadOptions(checksum: wrong, destination: target))
        }
        #expect(try Data(contentsOf: target) == Data("the user's old file".utf8))
        let right = try #require(Checksum(md5: TestContent(name: "over", size: 50000).md5.hexString))
        _ = try await manager.download(url, options: DownloadOptions(checksum: right, destination: target))
        #expect(try md5OfFile(target) == TestContent(name: "over", size: 50000).md5)
        await manager.shutdown()
    }

    @Test("Asking again with another destination copies the file there, without the network; the first stays")
    func copied() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/mover?size=20000")
        let first = temporary.url.appendingPathComponent("a/first.bin")
        let second = temporary.url.appendingPathComponent("b/second.bin")
        _ = try await manager.download(url, options: DownloadOptions(destination: first))
        let before = server.requests.count
        let receipt = try await manager.download(url, options: DownloadOptions(destination: second))
        #expect(server.requests.count == before)
        #expect(receipt.fileURL == second.standardizedFileURL)
        #expect(fileSize(first) == 20000 && fileSize(second) == 20000)
        #expect(try md5OfFile(second) == TestContent(name: "mover", size: 20000).md5)
        let names = try FileManager.default.contentsOfDirectory(atPath: second.deletingLastPathComponent().path)
        #expect(names == ["second.bin"], "no copy left behind: \(names)")
        // A file in the completed area is the manager's: a destination takes it away from there.
        let plain = server.url("/bytes/plain?size=1000")
        let inArea = try await manager.download(plain)
        let third = temporary.url.appendingPathComponent("c/third.bin")
        _ = try await manager.download(plain, options: DownloadOptions(destination: third))
        #expect(fileSize(inArea.fileURL) == nil && fileSize(third) == 1000)
        await manager.shutdown()
    }

    @Test("A completed file moves off the actor, after the file work queued before it; a removal meanwhile follows it")
    func movedOffTheActor() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/offactor?size=30000")
        let first = try await manager.download(url)
        let target = temporary.url.appendingPathComponent("moved/here.bin")
        // The file-work queue is busy (a slow disk): the move waits behind it, and the actor does not.
        let gate = DispatchSemaphore(value: 0)
        manager.fileWork.async { gate.wait() }
        let (answers, answer) = AsyncStream.makeStream(of: Result<DownloadReceipt, DownloadError>.self)
        let events = await manager.events(for: url)
        await manager.enqueue(url, options: DownloadOptions(destination: target), completion: { answer.yield($0) })
        await manager.remove(url)
        // The actor answers while the move waits; the removal waits for the move.
        #expect(await manager.receipt(for: url)?.state == .completed)
        #expect(fileSize(first.fileURL) == 30000 && fileSize(target) == nil)
        gate.signal()
        var answered = answers.makeAsyncIterator()
        let moved = try #require(await answered.next()).get()
        #expect(moved.fileURL == target.standardizedFileURL, "the request before the removal is answered first")
        for await event in events {
            if case .removed = event { break }
        }
        await manager.waitUntilQuiet()
        #expect(await manager.receipt(for: url) == nil)
        #expect(fileSize(first.fileURL) == nil && fileSize(target) == nil, "the removal deleted the moved file")
        await manager.shutdown()
    }

    @Test(
        "A request held behind a look at a completed file, after a removal also held there, starts a new download",
        .timeLimit(.minutes(TestTime.minutes(4)))  // it hung: the request was dropped and nothing answered it
    )
    func requestAfterHeldRemoval() async throws {
        // Found by the model test (seed 24): the removal forgot the receipt, the request after it adopted its options
        // into nothing, and its transfer never started; a shutdown then waited for it for ever.
        let manager = try makeManager()
        let url = server.url("/bytes/heldagain?size=30000")
        let content = TestContent(name: "heldagain", size: 30000)
        let first = try await manager.download(url)
        // The file-work queue is busy: the look at the completed file waits, the removal and the request behind it.
        let gate = DispatchSemaphore(value: 0)
        manager.fileWork.async { gate.wait() }
        await manager.enqueue(url, options: DownloadOptions(checksum: Checksum(md5: content.md5.hexString)))
        await manager.remove(url)
        let (answers, answer) = AsyncStream.makeStream(of: Result<DownloadReceipt, DownloadError>.self)
        await manager.enqueue(
            url, options: DownloadOptions(naming: .custom("again.bin")), completion: { answer.yield($0) })
        gate.signal()
        var answered = answers.makeAsyncIterator()
        let again = try #require(await answered.next()).get()
        #expect(again.state == .completed && again.fileURL.lastPathComponent == "again.bin")
        #expect(try md5OfFile(again.fileURL) == content.md5)
        #expect(fileSize(first.fileURL) == nil, "the removal deleted the first file")
        await manager.shutdown()
    }

    @Test("A completed file that cannot be put where a request asks fails that request clearly, and stays where it was")
    func unplacedFailsTheRequest() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/unplaced?size=12000")
        let first = temporary.url.appendingPathComponent("first.bin")
        _ = try await manager.download(url, options: DownloadOptions(destination: first))
        // Counted after the first download: a retry of its own (a stall on a loaded machine) is not what is checked.
        let requestsBefore = server.requests.count
        let notAFolder = temporary.url.appendingPathComponent("plain-file")
        try Data("x".utf8).write(to: notAFolder)
        for target in [temporary.url.appendingPathComponent("plain-file/under.bin"), temporary.url] {
            do {
                _ = try await manager.download(url, options: DownloadOptions(destination: target))
                Issue.record("\(target.path) was taken")
            } catch let error as DownloadError {
                #expect(error == .fileSystem, "\(error)")
            }
            let receipt = try #require(await manager.receipt(for: url))
            #expect(receipt.state == .completed && receipt.fileURL == first.standardizedFileURL)
            #expect(fileSize(first) == 12000)
        }
        // Nobody waiting: said as a warning.
        let events = await manager.events(for: url)
        await manager.enqueue(url, options: DownloadOptions(destination: temporary.url))
        for await event in events {
            if case .warning(_, let reason) = event {
                #expect(reason.contains("is a folder"), "\(reason)")
                break
            }
        }
        #expect(server.requests.count == requestsBefore, "a request that cannot be placed fetched the file again")
        await manager.shutdown()
    }

    @Test("A destination that is a folder or inside the state folder is refused clearly")
    func refused() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/bad?size=1000")
        for target in [temporary.url, temporary.url.appendingPathComponent("manager/.downloader/x")] {
            do {
                _ = try await manager.download(url, options: DownloadOptions(destination: target))
                Issue.record("\(target.path) was accepted")
            } catch let error as DownloadError {
                #expect(error == .fileSystem && error.reason.contains("destination"), "\(error)")
            }
        }
        #expect(server.requests.isEmpty)
        await manager.shutdown()
    }
}
