import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

@Suite("DownloadManager")
final class DownloadManagerTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var temporary: TemporaryDirectory { TemporaryDirectory(existing: workspace.directory) }

    init() throws {
        workspace = try TestWorkspace()
    }

    func makeManager(
        maximumActive: Int = 4, prioritization: DownloadPrioritization = .fifo, retryLimit: Int = 5,
        stallTimeout: TimeInterval = TestTime.stallTimeout, directory: URL? = nil, window: Int = 16 << 20
    ) throws -> DownloadManager {
        var configuration = DownloadManager.Configuration.forTests(
            directory: directory ?? temporary.url, maximumActive: maximumActive, retryLimit: retryLimit,
            stallTimeout: stallTimeout, window: window)
        configuration.prioritization = prioritization
        return try DownloadManager(configuration: configuration)
    }

    func gets(_ name: String) -> [RecordedRequest] {
        server.requests.filter { $0.method == "GET" && $0.path == "/bytes/\(name)" }
    }

    @Test("A download returns a completed, verified receipt whose file is in the completed area")
    func downloadCompletes() async throws {
        let manager = try makeManager()
        let receipt = try await manager.download(server.url("/bytes/one?size=300000"))
        #expect(receipt.state == .completed)
        #expect(receipt.md5 == TestContent(name: "one", size: 300_000).md5.hexString)
        #expect(try md5OfFile(receipt.fileURL).hexString == receipt.md5)
        #expect(receipt.totalBytesWritten == 300_000 && receipt.totalBytesExpectedToWrite == 300_000)
        #expect(await manager.receipt(for: server.url("/bytes/one?size=300000")) == receipt)
        await manager.shutdown()
    }

    @Test("Waiting downloads start in FIFO or LIFO order", arguments: [DownloadPrioritization.fifo, .lifo])
    func startOrder(prioritization: DownloadPrioritization) async throws {
        let manager = try makeManager(maximumActive: 1, prioritization: prioritization)
        let names = (0..<5).map { "o\($0)" }
        let urls = names.map { server.url("/bytes/\($0)?size=20000&rate=400000") }
        for url in urls { await manager.enqueue(url) }
        for url in urls { _ = try await manager.download(url) }  // joins each: waits without changing the order
        var firstSeen: [String] = []
        for request in server.requests where !firstSeen.contains(request.path) { firstSeen.append(request.path) }
        let expected = prioritization == .fifo ? names : [names[0]] + names.dropFirst().reversed()
        #expect(firstSeen == expected.map { "/bytes/\($0)" })
        await manager.shutdown()
    }

    @Test("Duplicate requests for one URL join: the file is fetched once and every caller gets it")
    func duplicatesJoin() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/dup?size=200000&rate=2000000")
        let callbacks = Locked(0)
        await manager.enqueue(
            url, completion: { result in if case .success = result { callbacks.withLock { $0 += 1 } } })
        let receipts = try await withThrowingTaskGroup(of: DownloadReceipt.self) { group in
            for _ in 0..<5 { group.addTask { try await manager.download(url) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(receipts.count == 5 && Set(receipts).count == 1)
        // The completion runs on the callback channel's queue, after the download calls may have returned: waited for
        // (with a deadline), then counted — once, never twice.
        let deadline = TestTime.deadline(in: .seconds(10))
        while callbacks.withLock({ $0 }) == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(callbacks.withLock { $0 } == 1)
        // Fetched once: one request from byte 0, and every later one starts past the one before (a slow machine may
        // see a window retried from where its bytes stopped, never a second download from the start).
        let starts = gets("dup").map { $0.rangeStart ?? 0 }
        #expect(starts.first == 0)
        #expect(zip(starts, starts.dropFirst()).allSatisfy { $0 < $1 }, "ranges \(gets("dup").map(\.range))")
    }

    @Test("A completed URL returns at once; if its file was deleted it downloads again")
    func completedAndStale() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/stale?size=5000")
        let first = try await manager.download(url)
        let again = try await manager.download(url)
        #expect(again == first && gets("stale").count == 1)
        try FileManager.default.removeItem(at: first.fileURL)
        let third = try await manager.download(url)
        #expect(third.state == .completed && gets("stale").count == 2)
        #expect(FileManager.default.fileExists(atPath: third.fileURL.path))
    }

    @Test("Suspend mid-file keeps the partial file; resume continues by Range to MD5-correct bytes")
    func suspendAndResume() async throws {
        let manager = try makeManager(window: 65_536)
        let size = 600_000
        let url = server.url("/bytes/sr?size=\(size)&rate=600000")
        await manager.enqueue(url)
        #expect(await server.waitUntil { $0.bodyBytesSent >= 200_000 })
        await manager.suspend(url)
        await manager.waitUntilQuiet()
        let suspended = try #require(await manager.receipt(for: url))
        #expect(suspended.state == .suspended)
        let kept = try #require(fileSize(DownloadDirectory(root: temporary.url).partialFile(for: url)))
        #expect(kept > 0 && kept < Int64(size) && suspended.totalBytesWritten == kept)

        await manager.resume(url)
        let receipt = try await manager.download(url)
        #expect(receipt.md5 == TestContent(name: "sr", size: size).md5.hexString)
        #expect(gets("sr").contains { $0.rangeStart == Int(kept) })
    }

    @Test("Remove deletes the files and the receipt and fails waiting callers")
    func removeDeletesEverything() async throws {
        let manager = try makeManager()
        let done = try await manager.download(server.url("/bytes/rm1?size=1000"))
        let running = server.url("/bytes/rm2?size=500000&rate=500000")
        let waiter = Task { try await manager.download(running) }
        #expect(await server.waitUntil { $0.bodyBytesSent >= 50_000 })
        await manager.remove(running)
        await manager.remove(done)
        await #expect(throws: DownloadError.cancelled) { try await waiter.value }
        await manager.waitUntilQuiet()
        #expect(await manager.allReceipts.isEmpty)
        #expect(temporary.files().filter { !$0.hasPrefix(".downloader/") }.isEmpty)
        #expect(temporary.files().filter { $0.hasPrefix(".downloader/partial") }.isEmpty)
    }

    @Test("After an abrupt stop a second manager finds every unfinished download suspended and resumes it by Range")
    func secondManagerResumes() async throws {
        let first = try makeManager(window: 65_536)
        let names = ["k0", "k1", "k2"]
        // Each download's first response pauses after 30,000 bytes: none can finish before the copy, however slow
        // the machine (a paced rate let one finish first under ThreadSanitizer).
        let urls = names.map { server.url("/bytes/\($0)?size=400000&stallAfter=30000&stall=60&stallCount=1") }
        let events = await first.events()
        for url in urls { await first.enqueue(url) }
        // Bytes on disk, not just sent: a slow (instrumented) client may lag the server's count by a lot.
        let wrote = await firstEvent(in: events, within: .seconds(60)) { event in
            if case .progress(let receipt) = event { receipt.totalBytesWritten >= 16_384 } else { false }
        }
        #expect(wrote != nil)
        // Each download's state (its validators), saved at its response's start by the disk's last stage: without
        // it a rerun rightly starts from byte 0, and an instrumented run may copy before that stage caught up.
        let directory = DownloadDirectory(root: temporary.url)
        let deadline = TestTime.deadline(in: .seconds(60))
        while !urls.allSatisfy({ fileSize(directory.stateFile(for: $0)) != nil }) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))  // a deadline, not synchronisation
        }
        await first.saveReceiptsNow()  // what the save after each actor turn has done already, made explicit
        // What kill -9 leaves behind: the files as they are at this instant, copied in the order a crash could
        // leave them (the journal and saved hash states first, then the partial files, which only grow).
        let crash = try TemporaryDirectory()
        defer { crash.remove() }
        try copyAsCrashLeavesIt(
            temporary.url.appendingPathComponent(".downloader"), to: crash.url.appendingPathComponent(".downloader"))
        await first.shutdown()

        let second = try makeManager(directory: crash.url, window: 65_536)
        let loaded = await second.allReceipts
        #expect(loaded.map(\.url) == urls, "in the order they were first requested, also after a restart")
        #expect(loaded.count == 3 && loaded.allSatisfy { $0.state == .suspended })
        let partials = loaded.map(\.totalBytesWritten)
        #expect(partials.contains { $0 > 0 })
        server.resetStatistics()
        await second.resumeAll()
        for (index, url) in urls.enumerated() {
            let receipt = try await second.download(url)
            #expect(receipt.md5 == TestContent(name: names[index], size: 400_000).md5.hexString)
            // A file whose every byte was on disk at the crash (a slow test thread) needs no GET at all.
            if partials[index] > 0 && partials[index] < 400_000 {
                #expect(gets(names[index]).first?.rangeStart == Int(partials[index]))
            }
        }
        await second.shutdown()
    }

    @Test("Unreadable journal lines are skipped and reported; the other receipts load and the manager works")
    func corruptReceipts() async throws {
        let first = try makeManager()
        let kept = try await first.download(server.url("/bytes/kept?size=100"))
        await first.shutdown()
        let journal = temporary.url.appendingPathComponent(".downloader/journal")
        let handle = try FileHandle(forWritingTo: journal)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("{ not json\n".utf8))
        try handle.close()

        let manager = try makeManager()
        #expect(manager.receiptsRecoveryError == .corruptReceipts)
        #expect(manager.receiptsRecoveryError?.reason.contains("1 unreadable line") == true)
        #expect(await manager.allReceipts == [kept])
        let receipt = try await manager.download(server.url("/bytes/after?size=100"))
        #expect(receipt.state == .completed)
    }

    @Test("A receipts.json that is not the old receipts format is a user's file: left alone")
    func foreignReceiptsFile() async throws {
        try Data("{ \"mine\": true }".utf8).write(to: temporary.url.appendingPathComponent("receipts.json"))
        let manager = try makeManager()
        #expect(manager.receiptsRecoveryError == nil)
        #expect(
            try Data(contentsOf: temporary.url.appendingPathComponent("receipts.json"))
                == Data("{ \"mine\": true }".utf8))
        await manager.shutdown()
    }

    @Test("Transient faults retry with backoff: 503 with Retry-After, and dropped connections resume by Range")
    func retries() async throws {
        let manager = try makeManager(window: 65_536)
        let busy = try await manager.download(server.url("/bytes/busy?size=1000&status=503&statusCount=2&retryAfter=0"))
        #expect(busy.state == .completed)
        // 503, 503, then the GET: nothing arrived before, so nothing was saved and there is nothing to probe.
        #expect(server.requests.filter { $0.path == "/bytes/busy" }.map(\.method) == ["GET", "GET", "GET"])

        let dropped = try await manager.download(server.url("/bytes/drops?size=300000&dropAt=100000&dropCount=1"))
        #expect(dropped.md5 == TestContent(name: "drops", size: 300_000).md5.hexString)
        #expect(gets("drops").contains { $0.rangeStart == 100_000 })
    }

    @Test("After the retry limit the download fails with the last error; 404 fails at once")
    func retryLimitAndPermanentErrors() async throws {
        let manager = try makeManager(retryLimit: 2)
        await #expect(throws: DownloadError.httpStatus) {
            try await manager.download(self.server.url("/bytes/down?size=10&status=503"))
        }
        #expect(server.requests.filter { $0.path == "/bytes/down" }.count == 3)
        let failed = try #require(await manager.receipt(for: server.url("/bytes/down?size=10&status=503")))
        #expect(failed.state == .failed && failed.error?.statusCode == 503)

        await #expect(throws: DownloadError.httpStatus) { try await manager.download(self.server.url("/status/404")) }
        #expect(server.requests.filter { $0.path == "/status/404" }.count == 1)
    }

    @Test("A stall longer than the watchdog is closed and retried from where it stopped")
    func stallWatchdog() async throws {
        // Retries enough for a loaded machine, where a request can also wait 0.5 s for its first byte (each such retry
        // asks again from the same place; a full suite once spent all five).
        let manager = try makeManager(retryLimit: 100, stallTimeout: 0.5)
        let receipt = try await manager.download(server.url("/bytes/stall?size=100000&stallAfter=30000&stall=20"))
        #expect(receipt.md5 == TestContent(name: "stall", size: 100_000).md5.hexString)
        // Every response stalls after 30 000 bytes: each time the watchdog closes it and the retry resumes there. (On
        // a slow instrumented run a request can also be closed before its first byte: it is then asked again from
        // the same place, never from further back.)
        let starts = gets("stall").compactMap(\.rangeStart)
        #expect(starts == starts.sorted() && Array(Set(starts)).sorted() == [0, 30_000, 60_000, 90_000], "\(starts)")
    }

    @Test("Cancelling the awaiting task throws CancellationError and suspends only if nobody else waits")
    func cancellation() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/cx?size=400000&stallAfter=10000&stall=60&stallCount=1")  // cannot finish first
        let lonely = Task { try await manager.download(url) }
        #expect(await server.waitUntil { $0.bodyBytesSent >= 10_000 })
        lonely.cancel()
        await #expect(throws: CancellationError.self) { try await lonely.value }
        #expect(await manager.receipt(for: url)?.state == .suspended)

        let shared = server.url("/bytes/cy?size=300000&stallAfter=10000&stall=2&stallCount=1")
        let a = Task { try await manager.download(shared) }
        let b = Task { try await manager.download(shared) }
        #expect(await server.waitUntil { $0.requests.contains { $0.path == "/bytes/cy" && $0.method == "GET" } })
        a.cancel()
        await #expect(throws: CancellationError.self) { try await a.value }
        let receipt = try await b.value
        #expect(receipt.state == .completed)
    }

    @Test("events() reports state changes in order and throttled progress with speed and ETA")
    func events() async throws {
        let manager = try makeManager()
        // Four seconds: several ticks even when the other tests keep the cooperative threads busy for a second.
        let url = server.url("/bytes/ev?size=1000000&rate=250000")
        let stream = await manager.events()
        let collector = Task { () -> [DownloadEvent] in
            var events: [DownloadEvent] = []
            for await event in stream {
                events.append(event)
                if case .stateChanged(let receipt) = event, receipt.state == .completed { break }
            }
            return events
        }
        let started = Date()
        _ = try await manager.download(url)
        let events = await collector.value
        let elapsed = Date().timeIntervalSince(started)
        let states = events.compactMap { event -> DownloadState? in
            if case .stateChanged(let receipt) = event { return receipt.state } else { return nil }
        }
        #expect(states == [.queued, .downloading, .completed])
        let progress = events.compactMap { event -> DownloadReceipt? in
            if case .progress(let receipt) = event { return receipt } else { return nil }
        }
        #expect(progress.count >= 2)
        #expect(Double(progress.count) <= elapsed * 10 + 2)
        #expect(zip(progress, progress.dropFirst()).allSatisfy { $0.totalBytesWritten <= $1.totalBytesWritten })
        #expect(progress.contains { ($0.bytesPerSecond ?? 0) > 0 && $0.estimatedTimeRemaining != nil })
        #expect(progress.last?.progress.totalUnitCount == 1_000_000)
    }

    @Test("Bad URLs fail clearly without touching the network")
    func badURLs() async throws {
        let manager = try makeManager()
        await #expect(throws: DownloadError.unsupportedScheme) { try await manager.download(URL(string: "ftp://h/x")!) }
        await #expect(throws: DownloadError.invalidURL) { try await manager.download("not a url") }
        let receipt = await manager.enqueue(URL(string: "file:///etc/passwd")!)
        #expect(receipt.state == .failed && receipt.error == .unsupportedScheme)
        #expect(server.requests.isEmpty)
    }

    @Test("Forgetting a download writes its removal to the journal once, and a restart does not bring it back")
    func forgetWritesOneRemoval() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/forgotten?size=3000")
        _ = try await manager.download(url)
        await manager.forget(url)
        await manager.shutdown()  // every pending save written
        let journal = try String(
            contentsOf: temporary.url.appendingPathComponent(".downloader/journal"), encoding: .utf8)
        let removals = journal.split(separator: "\n").filter {
            $0.hasPrefix(url.absoluteString + "\t") && $0.contains("{\"remove\"")
        }
        #expect(removals.count == 1, "\(journal)")
        let restarted = try makeManager()
        #expect(await restarted.receipt(for: url) == nil)
        await restarted.shutdown()
    }
}
