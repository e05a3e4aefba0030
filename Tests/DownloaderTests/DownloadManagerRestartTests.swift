import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// What a caller asked survives a restart, and no download touches another's file (issue #32): each test failed on
/// d1ecfd3.
@Suite("DownloadManager across restarts")
final class DownloadManagerRestartTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var temporary: TemporaryDirectory { TemporaryDirectory(existing: workspace.directory) }

    init() throws {
        workspace = try TestWorkspace()
    }

    func makeManager(maximumActive: Int = 4) throws -> DownloadManager {
        try DownloadManager(configuration: .forTests(directory: temporary.url, maximumActive: maximumActive))
    }

    static let wrongSHA256 = try! Checksum(parsing: "sha-256=" + String(repeating: "ab", count: 32))

    static func sha256(_ name: String, size: Int) -> Checksum {
        Checksum(algorithm: .sha256, digest: TestContent(name: name, size: size).sha256.bytes)!
    }

    /// A URL whose first GET stops for a minute after `bytes` body bytes (later GETs run through).
    func heldURL(_ name: String, size: Int = 400_000, after bytes: Int = 100_000, query: String = "") -> URL {
        server.url("/bytes/\(name)?size=\(size)&stallAfter=\(bytes)&stall=60&stallCount=1\(query)")
    }

    @Test(
        "Picking up partial files (hashing them again, syncing) never holds the manager: it answers meanwhile (issue #48)"
    )
    func restoreLeavesTheActorFree() async throws {
        // More downloads than the machine has cores: if their file work ran on the cooperative threads (the actor's),
        // it would hold every one of them while it lasts (1.1–2.2 s for 12–19 partial files after kill -9).
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let count = cores + 2
        let urls = (0..<count).map { heldURL("pickup\($0)", after: 50_000) }
        let first = try makeManager(maximumActive: count)
        for url in urls { await first.enqueue(url) }
        #expect(await server.waitUntil { $0.stallsBegun >= count })
        await first.shutdown()

        let entered = Locked(0)
        let answered = Locked(false)
        let timedOut = Locked(false)
        var configuration = DownloadManager.Configuration.forTests(directory: temporary.url, maximumActive: count)
        configuration.continuesInterruptedDownloads = true
        // Each pick-up waits until the manager has answered (or 20 s): a test's stand-in for long file work.
        configuration.beforeRestore = {
            entered.withLock { $0 += 1 }
            let deadline = TestTime.deadline(in: .seconds(20))
            while !answered.withLock({ $0 }) {
                guard ContinuousClock.now < deadline else { return timedOut.withLock { $0 = true } }
                usleep(1000)
            }
        }
        let second = try DownloadManager(configuration: configuration)
        // Once as many pick-ups hold as there are cores, ask the manager (from a thread: the test's own task may be
        // among those held).
        let asked = try await onThread {
            let deadline = TestTime.deadline(in: .seconds(20))
            while entered.withLock({ $0 }) < cores && ContinuousClock.now < deadline { usleep(1000) }
            return entered.withLock { $0 } >= cores
        }
        #expect(asked, "only \(entered.withLock { $0 }) pick-ups began")
        let page = await second.receipts(after: nil, limit: 100)
        answered.withLock { $0 = true }
        #expect(page.receipts.count == count)
        #expect(!timedOut.withLock { $0 }, "the manager answered only after the pick-ups' deadline")
        for url in urls { _ = try await second.download(url) }
        await second.shutdown()
    }

    @Test("A wrong expected checksum given before a restart still fails the download after it")
    func expectationSurvivesRestart() async throws {
        let url = heldURL("wrong")
        let first = try makeManager()
        await first.enqueue(url, options: DownloadOptions(checksum: Self.wrongSHA256))
        #expect(await server.waitUntil { $0.bodyBytesSent >= 100_000 })
        await first.shutdown()

        let second = try makeManager()
        #expect(await second.receipt(for: url)?.state == .suspended)
        await #expect(throws: DownloadError.checksumMismatch) { try await second.download(url) }
        #expect(await second.receipt(for: url)?.state == .failed)
        await second.shutdown()

        // resume(url) continues it with its own expectation too.
        let third = try makeManager()
        let events = await third.events(for: url)
        await third.resume(url)
        let end = await firstEvent(in: events, within: .seconds(60)) { $0.receipt?.state.isResting ?? false }
        #expect(end?.receipt?.state == .failed, "\(String(describing: end))")
        await third.shutdown()
    }

    @Test("A download still queued at shutdown comes back with the algorithm and digest it asked for")
    func queuedExpectationSurvivesRestart() async throws {
        let busy = heldURL("busy", after: 1000)
        let queued = server.url("/bytes/later?size=30000")
        let expected = Self.sha256("later", size: 30_000)
        let first = try makeManager(maximumActive: 1)
        await first.enqueue(busy)
        #expect(await server.waitUntil { $0.bodyBytesSent >= 1000 })
        await first.enqueue(queued, options: DownloadOptions(checksum: expected))
        #expect(await first.receipt(for: queued)?.state == .queued)
        await first.shutdown()

        let second = try makeManager(maximumActive: 1)
        await second.remove(busy)
        let receipt = try await second.download(queued)
        #expect(receipt.checksum == expected)
        #expect(receipt.verification == .checksum(expected), "compared, not only computed: \(receipt)")
        await second.shutdown()
    }

    @Test("Two URLs with the same file name and bytes get a file each; removing one keeps the other's")
    func identicalFilesStaySeparate() async throws {
        let a = server.url("/bytes/twin?size=5000&filename=twin.bin")
        let b = server.url("/bytes/twin?size=5000&filename=twin.bin&mirror=2")
        let manager = try makeManager()
        let first = try await manager.download(a)
        let second = try await manager.download(b)
        #expect(first.fileURL != second.fileURL, "one file for two downloads: \(first.fileURL.path)")
        await manager.remove(b)
        await manager.waitUntilQuiet()
        let kept = try #require(await manager.receipt(for: a))
        #expect(kept.state == .completed)
        #expect(FileManager.default.fileExists(atPath: kept.fileURL.path), "removing b deleted a's file")
        await manager.shutdown()

        // Across a restart: a third URL for the same name and bytes gets its own file as well.
        let c = server.url("/bytes/twin?size=5000&filename=twin.bin&mirror=3")
        let again = try makeManager()
        let third = try await again.download(c)
        #expect(third.fileURL != kept.fileURL)
        await again.forget(c)
        await again.remove(a)
        await again.waitUntilQuiet()
        #expect(FileManager.default.fileExists(atPath: third.fileURL.path), "forgotten, c's file is the user's")
        await again.shutdown()
    }

    @Test("A suspension is one stateChanged(.suspended); the bytes that arrive while it stops are progress")
    func oneEventPerSuspension() async throws {
        let url = heldURL("once")
        let manager = try makeManager()
        let events = await manager.events(for: url)
        let collected = Task {
            var all: [DownloadEvent] = []
            for await event in events { all.append(event) }
            return all
        }
        await manager.enqueue(url)
        #expect(await server.waitUntil { $0.bodyBytesSent >= 100_000 })
        await manager.suspend(url)
        await manager.waitUntilQuiet()
        let final = try #require(await manager.receipt(for: url))
        await manager.shutdown()
        let all = await collected.value
        let states = all.compactMap { event -> DownloadState? in
            if case .stateChanged(let receipt) = event { return receipt.state }
            return nil
        }
        #expect(states.filter { $0 == .suspended }.count == 1, "\(states)")
        #expect(zip(states, states.dropFirst()).allSatisfy { $0 != $1 }, "a state published twice: \(states)")
        #expect(all.last?.receipt == final, "the last event is the receipt as it stays")
    }

    @Test("A request without a completion callback whose checksum conflicts with the download's gets a warning")
    func conflictWithoutCallbackWarns() async throws {
        let url = heldURL("conflict")
        let right = Self.sha256("conflict", size: 400_000)
        let manager = try makeManager()
        let events = await manager.events(for: url)
        await manager.enqueue(url, options: DownloadOptions(checksum: right))
        #expect(await server.waitUntil { $0.bodyBytesSent >= 100_000 })
        await manager.enqueue(url, options: DownloadOptions(checksum: Self.wrongSHA256))
        let warning = await firstEvent(in: events) {
            if case .warning = $0 { return true }
            return false
        }
        #expect(warning != nil, "the conflicting request was ignored silently")
        await manager.shutdown()
    }

    @Test("A newer version interrupted by a restart keeps the verified file it would replace; remove deletes both")
    func replacementAcrossRestart() async throws {
        // The newer version's response is held after its first 2,000 bytes until the manager has shut down, so that it
        // is surely still downloading then (a pace alone was outrun by a loaded machine: the download completed first).
        let holding = Locked(false)
        server.setBeforeChunk { _, sent in
            guard sent >= 2000 else { return }
            let deadline = TestTime.deadline(in: .seconds(30))
            while holding.withLock({ $0 }), ContinuousClock.now < deadline {
                usleep(500)  // polling an event with a deadline, not a delay
            }
        }
        let url = server.url("/bytes/kept?size=30000&rate=40000&paced=1")
        let first = try makeManager()
        let completed = try await first.download(url)
        holding.withLock { $0 = true }
        let other = try Checksum(parsing: "sha-256=" + String(repeating: "cd", count: 32))
        await first.enqueue(url, options: DownloadOptions(checksum: other))
        #expect(await server.waitUntil { $0.bodyBytesSent >= 30000 + 2000 })
        await first.shutdown()
        holding.withLock { $0 = false }

        let second = try makeManager()
        let restored = try #require(await second.receipt(for: url))
        #expect(restored.state == .suspended && restored.fileURL == completed.fileURL, "\(restored)")
        #expect(try md5OfFile(restored.fileURL) == TestContent(name: "kept", size: 30000).md5)
        await second.remove(url)
        await second.waitUntilQuiet()
        #expect(!FileManager.default.fileExists(atPath: completed.fileURL.path), "removed, its file stayed")
        await second.shutdown()
    }
}

extension DownloadManagerRestartTests {
    @Test("A completed file whose move to a newly asked name a crash cut short is still the completed file")
    func relocationCutShort() async throws {
        let url = server.url("/bytes/moved?size=3000")
        let first = try makeManager()
        let completed = try await first.download(url)
        await first.shutdown()
        // The journal line `relocate` writes before the move, and no move: as after a kill -9 between the two.
        let state = StateFolder(url: temporary.url.appendingPathComponent(".downloader"))
        let journal = try ReceiptJournal.open(state).journal
        var entry = JournalEntry(
            placing: url, options: DownloadOptions(naming: .custom("pick.bin")), name: "pick.bin", length: 3000,
            checksum: completed.checksum, suggested: nil)
        entry.replaced = .init(name: completed.filename, length: 3000, checksum: completed.checksum)
        journal.appendNow([.put(entry)])
        journal.close()
        let second = try makeManager()
        let restored = try #require(await second.receipt(for: url))
        #expect(restored.state == .completed && restored.fileURL == completed.fileURL, "\(restored)")
        await second.shutdown()
    }

    @Test("A batch's placement cut short by a crash before the move keeps the verified file: the download comes back")
    func forgettingPlacementCutShort() async throws {
        let url = server.url("/bytes/batch-cut?size=3000")
        let content = TestContent(name: "batch-cut", size: 3000)
        // What a kill -9 between the placement line and the move leaves: the verified partial file, and the line.
        let state = StateFolder(url: temporary.url.appendingPathComponent(".downloader"))
        let journal = try ReceiptJournal.open(state).journal
        let partial = PartialFiles(folder: state, url: url)
        try FileManager.default.createDirectory(
            at: partial.partialURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        try content.data.write(to: partial.partialURL)
        journal.appendNow([
            .put(
                JournalEntry(
                    placing: url, options: DownloadOptions(), name: "batch-cut", length: 3000,
                    checksum: Checksum(algorithm: .md5, digest: content.md5.bytes), suggested: nil,
                    forgetsWhenPlaced: true))
        ])
        journal.close()
        let manager = try makeManager()
        let restored = try #require(await manager.receipt(for: url), "the unmoved file's download was forgotten")
        #expect(restored.state == .suspended && restored.isInterrupted && restored.totalBytesWritten == 3000)
        let receipt = try await manager.download(url)
        #expect(try md5OfFile(receipt.fileURL) == content.md5)
        await manager.shutdown()
    }
}

/// A queued download's start (`downloading`) is saved once it has run `startSaveDelay`, or with its next line: a small
/// file is spared a journal line (issue #52), and nothing a restart reads changes.
extension DownloadManagerRestartTests {
    /// A manager with one slot whose start of a queued download is saved after `delay` seconds.
    func makeManager(startSaveDelay delay: TimeInterval) throws -> DownloadManager {
        var configuration = DownloadManager.Configuration.forTests(directory: temporary.url, maximumActive: 1)
        configuration.startSaveDelay = delay
        return try DownloadManager(configuration: configuration)
    }

    /// The state of `url`'s latest journal line (`remove` for a removal), or `nil` when it has none.
    func savedState(of url: URL, in directory: URL? = nil) -> String? {
        let journal = (directory ?? temporary.url).appendingPathComponent(".downloader/journal")
        guard let text = try? String(contentsOf: journal, encoding: .utf8),
            let line = text.split(separator: "\n").last(where: { $0.hasPrefix(url.absoluteString + "\t") })
        else { return nil }
        if line.contains("{\"remove\"") { return "remove" }
        guard let start = line.range(of: "\"state\":\"") else { return nil }
        return String(line[start.upperBound...].prefix { $0 != "\"" })
    }

    /// Queues `next` behind `busy`, held by the server, checks that it is saved as queued, then suspends `busy`: `next`
    /// starts.
    func start(_ next: URL, queuedBehind busy: URL, in manager: DownloadManager) async {
        await manager.enqueue(busy)
        #expect(await server.waitUntil { $0.bodyBytesSent >= 1000 })
        await manager.enqueue(next)
        await manager.saveReceiptsNow()
        #expect(savedState(of: next) == "queued")
        await manager.suspend(busy)
    }

    @Test("A queued download that starts is saved as queued until it has run the delay; a crash then brings it back")
    func queuedStartSavedLater() async throws {
        let busy = heldURL("busy-start", after: 1000)
        let next = server.url("/bytes/next-start?size=3000&gate=next-start&gateSize=2")
        let manager = try makeManager(startSaveDelay: 3600)
        // The busy download steps aside: the queued one starts, and its response is held at the gate.
        await start(next, queuedBehind: busy, in: manager)
        #expect(await server.waitUntil { $0.requests.contains { $0.target.hasPrefix("/bytes/next-start") } })
        #expect(await manager.receipt(for: next)?.state == .downloading)
        await manager.saveReceiptsNow()
        #expect(savedState(of: next) == "queued", "the start was saved at once")

        // A crash now (the state folder as it is, opened by another manager): queued or downloading alike, the
        // download comes back suspended and interrupted.
        let copy = try TemporaryDirectory()
        try FileManager.default.copyItem(
            at: temporary.url.appendingPathComponent(".downloader"),
            to: copy.url.appendingPathComponent(".downloader"))
        let crashed = try DownloadManager(configuration: .forTests(directory: copy.url, maximumActive: 1))
        let restored = try #require(await crashed.receipt(for: next))
        #expect(restored.state == .suspended && restored.isInterrupted, "\(restored)")
        await crashed.shutdown()

        // Its next line says the rest: placed, then completed.
        server.openGate("next-start")
        let receipt = try await manager.download(next)
        #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "next-start", size: 3000).md5)
        await manager.saveReceiptsNow()
        #expect(savedState(of: next) == "completed")
        await manager.remove(busy)
        await manager.shutdown()
    }

    @Test("A queued download that runs longer than the delay is saved as downloading")
    func longStartSaved() async throws {
        let busy = heldURL("busy-long", after: 1000)
        let next = heldURL("next-long", after: 1000)
        let manager = try makeManager(startSaveDelay: 0.2)
        await start(next, queuedBehind: busy, in: manager)
        // Saved by the manager's own ticker: no call of the test's writes it.
        let deadline = TestTime.deadline(in: .seconds(30))
        while savedState(of: next) != "downloading" && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(savedState(of: next) == "downloading")
        await manager.shutdown()
        #expect(savedState(of: next) == "suspended")
    }

    @Test(
        "A download queued and started by one request is saved at once, listened to or not; a listener hears it queued"
    )
    func startedAtOnceSaved() async throws {
        for listening in [false, true] {
            let url = heldURL("at-once-\(listening)", after: 1000)
            let manager = try makeManager(startSaveDelay: 3600)
            let events = listening ? await manager.events(of: [.stateChanged]) : nil
            await manager.enqueue(url)
            #expect(await server.waitUntil { $0.bodyBytesSent >= 1000 })
            await manager.saveReceiptsNow()
            // Not put off with the start: a crash now brings it back (suspended and interrupted).
            #expect(savedState(of: url) == "downloading", "listening: \(listening)")
            if let events {
                var states: [DownloadState] = []
                for await case .stateChanged(let receipt) in events where receipt.url == url {
                    states.append(receipt.state)
                    if receipt.state == .downloading { break }
                }
                #expect(states == [.queued, .downloading])
            }
            await manager.remove(url)
            await manager.shutdown()
        }
    }

    @Test("A suspended download that is resumed is saved as downloading at once")
    func resumedStartSavedAtOnce() async throws {
        let url = server.url("/bytes/resumed-start?size=400000&stallAfter=1000&stall=60&stallCount=2")
        let manager = try makeManager(startSaveDelay: 3600)
        await manager.enqueue(url)
        #expect(await server.waitUntil { $0.bodyBytesSent >= 1000 })
        await manager.suspend(url)
        await manager.saveReceiptsNow()
        #expect(savedState(of: url) == "suspended")
        // A crash within the delay must not leave it looking paused by its caller (it would not continue).
        await manager.resume(url)
        #expect(await server.waitUntil { $0.stallsBegun >= 2 })
        await manager.saveReceiptsNow()
        #expect(savedState(of: url) == "downloading")
        await manager.shutdown()
    }
}
