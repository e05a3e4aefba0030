import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// The manager's promises at the edges of a download's life, end to end over real sockets: each test here was
/// written against a defect seen on the previous manager (issue #11) and failed there.
@Suite("DownloadManager lifecycle")
final class DownloadManagerLifecycleTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var temporary: TemporaryDirectory { TemporaryDirectory(existing: workspace.directory) }

    init() throws {
        workspace = try TestWorkspace()
    }

    func makeManager(
        maximumActive: Int = 4, window: Int = 16 << 20, stallTimeout: TimeInterval = TestTime.stallTimeout
    ) throws -> DownloadManager {
        try DownloadManager(
            configuration: .forTests(
                directory: temporary.url, maximumActive: maximumActive, stallTimeout: stallTimeout, window: window))
    }

    func gets(_ name: String) -> [RecordedRequest] {
        server.requests.filter { $0.method == "GET" && $0.path == "/bytes/\(name)" }
    }

    static let wrongMD5 = String(repeating: "0", count: 32)

    @Test("Suspending and resuming just as a download finishes never fetches it again nor makes a (1) copy")
    func suspendResumeAtTheFinish() async throws {
        let manager = try makeManager()
        var random = SeededGenerator(seed: 11)
        var sent: Int64 = 0
        for index in 0..<(runsUnderSanitizer ? 40 : 150) {
            let name = "race\(index)"
            let url = server.url("/bytes/\(name)?size=20000&filename=\(name).bin")
            await manager.enqueue(url, options: DownloadOptions(naming: .suggested))
            sent += 20_000
            // The last byte has left the server: the transfer is verifying or moving the file now, or about to.
            let target = sent
            #expect(await server.waitUntil { $0.bodyBytesSent >= target })
            for _ in 0..<Int.random(in: 0..<40, using: &random) { await Task.yield() }
            await manager.suspend(url)
            await manager.resume(url)
            let receipt = try await manager.download(url)
            #expect(receipt.fileURL.lastPathComponent == "\(name).bin")
            #expect(try md5OfFile(receipt.fileURL) == TestContent(name: name, size: 20000).md5)
            // A suspend that lands before any byte is on disk refetches (nothing was kept); never more than that.
            #expect(gets(name).count <= 2)
            sent = server.statistics.bodyBytesSent
        }
        await manager.waitUntilQuiet()
        let duplicates = temporary.files().filter { $0.contains("(1)") }
        #expect(duplicates.isEmpty, "\(duplicates)")
        await manager.shutdown()
    }

    @Test("A request for a completed URL with another expected MD5 downloads once more and fails unless it matches")
    func expectationOnCompletedURL() async throws {
        let manager = try makeManager()
        // Throttled, so that progress of the second download is published while it runs.
        let url = server.url("/bytes/known?size=300000&rate=1000000")
        let right = TestContent(name: "known", size: 300_000).md5.hexString
        let first = try await manager.download(url)
        await #expect(throws: DownloadError.checksumMismatch) {
            try await manager.download(url, options: DownloadOptions(expectedMD5: Self.wrongMD5))
        }
        #expect(gets("known").count >= 2, "the server may have a new version: it was asked again")
        // The verified file is still there and still the download's.
        let receipt = try #require(await manager.receipt(for: url))
        #expect(receipt.state == .completed && receipt.fileURL == first.fileURL)
        #expect(receipt.totalBytesWritten == 300_000 && receipt.md5 == right)
        #expect(try md5OfFile(first.fileURL).hexString == right)
        // A matching expectation is answered from the receipt, without the network.
        let before = gets("known").count
        let again = try await manager.download(url, options: DownloadOptions(expectedMD5: right.uppercased()))
        #expect(again.fileURL == first.fileURL && gets("known").count == before)
        await manager.shutdown()
    }

    @Test("A caller that joins a running download with another expected MD5 gets checksumMismatch; the others succeed")
    func expectationOnJoin() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/joined?size=400000&rate=800000")
        let owner = Task { try await manager.download(url) }
        #expect(await server.waitUntil { $0.bodyBytesSent >= 50_000 })
        await #expect(throws: DownloadError.checksumMismatch) {
            try await manager.download(url, options: DownloadOptions(expectedMD5: Self.wrongMD5))
        }
        let receipt = try await owner.value
        #expect(receipt.md5 == TestContent(name: "joined", size: 400_000).md5.hexString)
        await manager.shutdown()
    }

    @Test("A completed URL requested with another naming gets its file under the new name, without the network")
    func namingOnCompletedURL() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/renamed?size=3000&filename=report.txt")
        let first = try await manager.download(url, options: DownloadOptions(naming: .md5OfURL))
        #expect(first.fileURL.lastPathComponent == DownloadDirectory.defaultFilename(for: url))
        let second = try await manager.download(url, options: DownloadOptions(naming: .suggested))
        #expect(second.fileURL.lastPathComponent == "report.txt")
        #expect(try md5OfFile(second.fileURL) == TestContent(name: "renamed", size: 3000).md5)
        #expect(!FileManager.default.fileExists(atPath: first.fileURL.path), "one file per URL")
        #expect(gets("renamed").count == 1)
        #expect(await manager.receipt(for: url)?.fileURL == second.fileURL)
        await manager.shutdown()
    }

    @Test("A request after shutdown() is refused with DownloadError.shutDown and logged, never dropped (issue #48)")
    func requestAfterShutdown() async throws {
        let records = Locked<[DownloadLogRecord]>([])
        var configuration = DownloadManager.Configuration.forTests(directory: temporary.url)
        configuration.log = { record in records.withLock { $0.append(record) } }
        let manager = try DownloadManager(configuration: configuration)
        await manager.shutdown()
        let url = server.url("/bytes/late?size=1000")
        await #expect(throws: DownloadError.shutDown) { try await manager.download(url) }
        let answered = Locked<Result<DownloadReceipt, DownloadError>?>(nil)
        let receipt = await manager.enqueue(
            server.url("/bytes/later?size=1000"),
            completion: { result in
                answered.withLock { $0 = result }
            })
        #expect(receipt.state == .failed && receipt.error == .shutDown, "\(receipt)")
        // Answered at once: no transfer, no wait (a deadline, not a delay).
        let deadline = TestTime.deadline(in: .seconds(1))
        while answered.withLock({ $0 }) == nil && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(answered.withLock { $0 } == .failure(.shutDown))
        // Without a completion, the refusal is still said: in the log.
        await manager.enqueue(server.url("/bytes/latest?size=1000"))
        let refusals = records.withLock { $0 }.filter { $0.metadata["error"] == "shutDown" }
        #expect(refusals.count == 3, "\(records.withLock { $0 })")
        #expect(server.requests.isEmpty)
    }

    @Test(
        "A request whose checksum, destination or file name contradicts a running download's is refused at once; equal options join (issue #48)"
    )
    func contradictingOptionsRefused() async throws {
        // The first download is held before its head for as long as the test asks (30 s and more under TSan on a
        // busy machine): no stall may cut it and start it again from byte 0 (CI saw two such GETs).
        let manager = try makeManager(stallTimeout: 600)
        // Held before its head until the test opens the gate: the download runs while the others ask.
        let url = server.url("/bytes/held?size=100000&gate=conflict&gateSize=1000")
        let right = try #require(Checksum(md5: TestContent(name: "held", size: 100_000).md5.hexString))
        let first = temporary.url.appendingPathComponent("first.bin")
        let asked = DownloadOptions(checksum: right, destination: first)
        // Its events, to tell a retry (a request that failed on a loaded machine) from a second download.
        let stream = await manager.events(for: url)
        let events = Task {
            var events: [DownloadEvent] = []
            for await event in stream { events.append(event) }
            return events
        }
        let owner = Task { try await manager.download(url, options: asked) }
        #expect(await server.waitUntil { $0.requests.contains { $0.path == "/bytes/held" } })
        let other = temporary.url.appendingPathComponent("other.bin")
        let contradictions = [
            DownloadOptions(destination: other), DownloadOptions(naming: .custom("renamed.bin")),
            DownloadOptions(expectedMD5: Self.wrongMD5, destination: first),
        ]
        // Asked without making the request, each refusal is the one the request then gets (issue #50: aria2's addUri).
        for options in contradictions {
            #expect(await manager.refusal(ofRequestFor: url, options: options) == .conflictingOptions)
        }
        #expect(await manager.refusal(ofRequestFor: url, options: asked) == nil)
        #expect(await manager.refusal(ofRequestFor: url) == nil)
        // "At once": while the first is still held before its head (the gate opens only below), not after it ends.
        // Before the fix each waited for it; the deadline bounds that wait, so the test fails rather than hangs.
        let refusals = Task {
            for options in contradictions {
                await #expect(throws: DownloadError.conflictingOptions) {
                    try await manager.download(url, options: options)
                }
            }
        }
        let refusalsDeadline = TestTime.deadline(in: .seconds(30))
        let refusedInTime = Locked(false)
        Task {
            await refusals.value
            refusedInTime.withLock { $0 = true }
        }
        while !refusedInTime.withLock({ $0 }) && ContinuousClock.now < refusalsDeadline {
            try await Task.sleep(for: .milliseconds(5))  // a deadline, not synchronisation
        }
        #expect(refusedInTime.withLock { $0 }, "refused while the first download was held")
        let refused = Locked<Result<DownloadReceipt, DownloadError>?>(nil)
        await manager.enqueue(
            url, options: DownloadOptions(destination: other),
            completion: { result in refused.withLock { $0 = result } })
        // Also while the first is held: the completion runs on its own queue, so a deadline (not a bound) waits.
        let deadline = TestTime.deadline(in: .seconds(60))
        while refused.withLock({ $0 }) == nil && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))  // a deadline, not synchronisation
        }
        #expect(refused.withLock { $0 } == .failure(.conflictingOptions))
        // Equal options (and none at all) join.
        let joiners = [asked, DownloadOptions()].map { options in
            Task { try await manager.download(url, options: options) }
        }
        server.openGate("conflict")
        let receipt = try await owner.value
        #expect(receipt.fileURL == first && receipt.checksum == right)
        for joiner in joiners { #expect(try await joiner.value.fileURL == first) }
        #expect(!FileManager.default.fileExists(atPath: other.path))
        // One download: its first byte asked for once, or once more for each retry it made (a request from byte 0
        // that failed before any byte was kept is asked again from byte 0; a joiner never starts another).
        let seen = await events.value
        let retries = seen.filter { if case .retrying = $0 { true } else { false } }.count
        let fromZero = server.requests.filter { $0.path == "/bytes/held" && ($0.rangeStart ?? 0) == 0 }
        #expect(fromZero.count >= 1 && fromZero.count <= 1 + retries, "\(fromZero.count) GETs from 0; events \(seen)")
        await manager.shutdown()
        #expect(await manager.refusal(ofRequestFor: url) == .shutDown)
    }

    @Test("A response header too large for libcurl fails at once as such, not retried as 'Out of memory' (issue #48)")
    func headerTooLarge() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/bighead?size=1000&bigHeader=1000000")
        await #expect(throws: DownloadError.invalidResponse) { try await manager.download(url) }
        let error = await manager.receipt(for: url)?.error
        #expect(error?.reason.contains("header") == true && error?.isTransient == false, "\(String(describing: error))")
        #expect(gets("bighead").count == 1, "not retried")
        await manager.shutdown()
    }

    @Test("A manager with a memory budget delivers every file right (issue #48)")
    func memoryBudget() async throws {
        var configuration = DownloadManager.Configuration.forTests(directory: temporary.url, maximumActive: 8)
        configuration.memoryBudget = 8 << 20  // 1 MiB a download: windows of 682 KiB
        let manager = try DownloadManager(configuration: configuration)
        let names = (0..<8).map { "budget\($0)" }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for name in names {
                group.addTask {
                    let receipt = try await manager.download(self.server.url("/bytes/\(name)?size=\(3 << 20)"))
                    #expect(try md5OfFile(receipt.fileURL) == TestContent(name: name, size: 3 << 20).md5)
                }
            }
            try await group.waitForAll()
        }
        // Windows of the budget's size: a 3 MiB file takes several.
        #expect(gets("budget0").count >= 4)
        await manager.shutdown()
    }

    @Test("suspend() ends every download() waiting for the URL with DownloadError.suspended")
    func suspendEndsWaiters() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/paused?size=400000&stallAfter=50000&stall=60&stallCount=1")
        let waiting = Task { try await manager.download(url) }
        #expect(await server.waitUntil { $0.bodyBytesSent >= 50_000 })
        await manager.suspend(url)
        // A deadline, not a delay: an instrumented run on a loaded machine once needed more than 20 s.
        let outcome = await Self.outcome(of: waiting, within: .seconds(90))
        #expect(outcome == .failure(.suspended))
        #expect(await manager.receipt(for: url)?.state == .suspended)
        await manager.shutdown()
    }

    @Test("suspend() of a waiting (queued) download ends its callers too")
    func suspendEndsQueuedWaiters() async throws {
        let manager = try makeManager(maximumActive: 1)
        let busy = server.url("/bytes/busy?size=400000&stallAfter=1000&stall=60&stallCount=1")
        let queued = server.url("/bytes/queued?size=1000")
        await manager.enqueue(busy)
        let waiting = Task { try await manager.download(queued) }
        #expect(await server.waitUntil { $0.bodyBytesSent >= 1000 })
        #expect(await manager.receipt(for: queued)?.state == .queued)
        await manager.suspend(queued)
        #expect(await Self.outcome(of: waiting, within: .seconds(20)) == .failure(.suspended))
        await manager.shutdown()
    }

    @Test("DownloadState has no case named none; receipts saved with the old names still load")
    func stateNames() throws {
        #expect(
            DownloadState.allCases.map(\.rawValue) == [
                "idle", "queued", "downloading", "suspended", "completed", "failed",
            ])
        let decoder = JSONDecoder()
        let legacy = try decoder.decode([DownloadState].self, from: Data(#"["none","willResume"]"#.utf8))
        #expect(legacy.map(\.rawValue) == ["idle", "queued"])
        #expect(DownloadState(rawValue: "none") == nil, "`state == .none` must not compile into Optional.none")
    }

    @Test(
        "Never more than the limit transfer at once, and exactly the limit when responses are held", arguments: [1, 3])
    func concurrencyLimit(limit: Int) async throws {
        let manager = try makeManager(maximumActive: limit)
        // The first `limit` responses wait for each other at the gate, so they are in flight together whatever the
        // machine's load; afterwards each response takes a while, so that an extra transfer would be seen.
        let urls = (0..<8).map {
            server.url("/bytes/g\(limit)-\($0)?size=100000&rate=1000000&gate=g\(limit)&gateSize=\(limit)")
        }
        try await withThrowingTaskGroup(of: DownloadReceipt.self) { group in
            for url in urls { group.addTask { try await manager.download(url) } }
            for try await receipt in group { #expect(receipt.state == .completed) }
        }
        #expect(server.statistics.peakActiveRequests == limit)
        await manager.shutdown()
    }

    enum Outcome: Equatable {
        case success
        case failure(DownloadError)
        case otherError
        case timedOut
    }

    /// Waits for a download task with a deadline: a call that never returns is a failure, not a hung suite.
    static func outcome(of task: Task<DownloadReceipt, any Error>, within limit: Duration) async -> Outcome {
        await withTaskGroup(of: Outcome.self) { group in
            group.addTask {
                do {
                    _ = try await task.value
                    return .success
                } catch let error as DownloadError {
                    return .failure(error)
                } catch {
                    return .otherError
                }
            }
            group.addTask {
                try? await Task.sleep(for: TestTime.scaled(limit))  // a deadline, not synchronisation
                return .timedOut
            }
            let first = await group.next()!
            group.cancelAll()
            task.cancel()
            return first
        }
    }
}
