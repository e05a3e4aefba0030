import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Run-time control of a manager (issue #14): priorities, the concurrency limit, forgetting a receipt, the retry
/// event and readable errors, over real sockets.
@Suite("DownloadManager control")
final class DownloadManagerControlTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var temporary: TemporaryDirectory { TemporaryDirectory(existing: workspace.directory) }

    init() throws {
        workspace = try TestWorkspace()
    }

    func makeManager(maximumActive: Int = 4, stallTimeout: TimeInterval = TestTime.stallTimeout) throws
        -> DownloadManager
    {
        try DownloadManager(
            configuration: .forTests(directory: temporary.url, maximumActive: maximumActive, stallTimeout: stallTimeout)
        )
    }

    func getOrder(_ names: [String]) -> [String] {
        server.requests.filter { $0.method == "GET" }.map { String($0.path.dropFirst("/bytes/".count)) }
            .filter { names.contains($0) }
    }

    @Test("Higher priority starts first among waiting downloads; ties keep FIFO order; priority survives a restart")
    func priorityOrder() async throws {
        let manager = try makeManager(maximumActive: 1)
        // The only slot is held by a response that stalls after its first bytes; suspending it lets the queue go.
        let blocker = server.url("/bytes/blocker?size=4000&stallAfter=1000&stall=60&stallCount=1")
        await manager.enqueue(blocker)
        #expect(await server.waitUntil { $0.bodyBytesSent >= 1000 })
        let plan: [(String, Int)] = [("low1", 0), ("high", 5), ("low2", 0), ("mid", 2), ("negative", -1)]
        for (name, priority) in plan {
            await manager.enqueue(
                server.url("/bytes/\(name)?size=2000"), options: DownloadOptions(priority: priority))
        }
        await manager.suspend(blocker)
        for (name, _) in plan { _ = try await manager.download(server.url("/bytes/\(name)?size=2000")) }
        #expect(getOrder(plan.map(\.0)) == ["high", "mid", "low1", "low2", "negative"])
        await manager.shutdown()

    }

    @Test("Priorities are saved: after a restart, resumed downloads start in priority order")
    func priorityAfterRestart() async throws {
        let manager = try makeManager(maximumActive: 1)
        let blocker = server.url("/bytes/holder?size=4000&stallAfter=1000&stall=60&stallCount=1")
        await manager.enqueue(blocker)
        #expect(await server.waitUntil { $0.bodyBytesSent >= 1000 })
        let plan: [(String, Int)] = [("b-low", 0), ("b-high", 7), ("b-mid", 3)]
        for (name, priority) in plan {
            await manager.enqueue(
                server.url("/bytes/\(name)?size=2000"), options: DownloadOptions(priority: priority))
        }
        await manager.shutdown()  // everything waiting is saved as suspended

        let reopened = try makeManager(maximumActive: 1)
        await reopened.resumeAll()
        for (name, _) in plan { _ = try await reopened.download(server.url("/bytes/\(name)?size=2000")) }
        #expect(getOrder(plan.map(\.0)) == ["b-high", "b-mid", "b-low"])
        await reopened.shutdown()
    }

    @Test("Raising the limit at run time starts waiting downloads at once")
    func raiseLimit() async throws {
        // Held responses are not stalls: on a slow instrumented run the watchdog must not close the first one while it
        // waits at the gate (its retry would count as a second arrival and open the gate with only two requests).
        let manager = try makeManager(maximumActive: 1, stallTimeout: 600)
        // Each response waits at the gate until three requests arrived: with one slot they never would.
        let urls = (0..<3).map { server.url("/bytes/l\($0)?size=50000&gate=lim&gateSize=3") }
        for url in urls { await manager.enqueue(url) }
        #expect(await server.waitUntil { $0.requests.filter { $0.method == "GET" }.count >= 1 })
        #expect(await manager.maximumActiveDownloads == 1)
        await manager.setMaximumActiveDownloads(3)
        #expect(await manager.maximumActiveDownloads == 3)
        for (index, url) in urls.enumerated() {
            let receipt = try await manager.download(url)
            #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "l\(index)", size: 50000).md5)
        }
        // Completing is the proof: the gate opens only once three GETs have arrived, so with one slot the downloads
        // would still be waiting (peakActiveRequests read 2 under ThreadSanitizer although all three completed).
        // Lowering stops nothing, and the limit never goes below one.
        await manager.setMaximumActiveDownloads(0)
        #expect(await manager.maximumActiveDownloads == 1)
        await manager.shutdown()
    }

    @Test("forget drops the receipt and keeps the completed file; a later request asks HEAD whether it is current")
    func forgetKeepsFile() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/kept?size=30000")
        let events = await manager.events()
        let receipt = try await manager.download(url)
        await manager.forget(url)
        #expect(await manager.receipt(for: url) == nil)
        let removed = await firstEvent(in: events) { if case .removed(url) = $0 { true } else { false } }
        #expect(removed != nil)
        await manager.waitUntilQuiet()
        #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "kept", size: 30000).md5)
        await manager.shutdown()

        let reopened = try makeManager()
        #expect(await reopened.receipt(for: url) == nil, "forgotten for good, not only until the next start")
        // The file's record (extended attributes) outlives the receipt: the server is asked whether that version is
        // still current, and the file is the answer.
        let before = server.requests.count
        let again = try await reopened.download(url)
        #expect(server.requests.dropFirst(before).map(\.method) == ["HEAD"])
        #expect(again.fileURL == receipt.fileURL && again.checksum == receipt.checksum)
        #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "kept", size: 30000).md5, "still there")
        await reopened.shutdown()
    }

    @Test("forget on an unfinished download removes it with its partial file")
    func forgetUnfinished() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/half?size=40000&stallAfter=10000&stall=60&stallCount=1")
        await manager.enqueue(url)
        #expect(await server.waitUntil { $0.bodyBytesSent >= 10000 })
        await manager.forget(url)
        await manager.waitUntilQuiet()
        #expect(await manager.receipt(for: url) == nil)
        let partial = await manager.directory.partialFile(for: url)
        #expect(fileSize(partial) == nil)
        await manager.shutdown()
    }

    @Test("A transient fault is reported as a retry event with its attempt, delay and reason")
    func retryEvent() async throws {
        let manager = try makeManager()
        let url = server.url("/bytes/flaky?size=200000&dropAt=100000")
        let events = await manager.events()
        async let receipt = manager.download(url)
        let retry = await firstEvent(in: events, within: .seconds(120)) {
            if case .retrying = $0 { true } else { false }
        }
        guard case .retrying(let retried, let attempt, let delay, let reason)? = retry else {
            Issue.record("no retry event")
            return
        }
        #expect(retried == url && attempt == 1 && delay >= 0)
        #expect(reason == .connectionFailed)
        #expect(try await receipt.totalBytesWritten == 200_000)
        await manager.shutdown()
    }

    @Test("A body that trickles below the lowest speed is a stall; a fast one is not")
    func lowestSpeed() async throws {
        var configuration = DownloadManager.Configuration.forTests(directory: temporary.url, retryLimit: 0)
        configuration.lowestSpeedLimit = 20_000
        configuration.lowestSpeedInterval = 1
        let manager = try DownloadManager(configuration: configuration)
        // 2,000 bytes/s: something arrives all the time, so the stall timeout (10 s) never fires.
        let slow = server.url("/bytes/trickle?size=100000&rate=2000")
        await #expect(throws: DownloadError.stalled) { try await manager.download(slow) }
        let reason = await manager.receipt(for: slow)?.error?.reason ?? ""
        #expect(reason.contains("slower than 20000 bytes/s"), "\(reason)")
        await manager.shutdown()
        // A fast body completes. With retries: under ThreadSanitizer beside the whole suite, one second with under
        // 20 KB delivered happened once (CI), and that is a stall by the rule; a body judged slow every time would
        // still fail here.
        configuration.retryLimit = 5
        configuration.directory = temporary.url.appendingPathComponent("fast")
        let second = try DownloadManager(configuration: configuration)
        let fast = server.url("/bytes/quick?size=3000000&rate=4000000")
        #expect(try await second.download(fast).totalBytesWritten == 3_000_000)
        await second.shutdown()
    }

    @Test("localizedDescription says what happened and to which URL, with credentials hidden")
    func localizedDescriptions() async throws {
        let manager = try makeManager()
        let url = server.url("/status/404").withCredentials("user", "secret")
        do {
            _ = try await manager.download(url)
            Issue.record("a 404 succeeded")
        } catch {
            let text = error.localizedDescription
            #expect(text.contains("404") && text.contains("/status/404"), "\(text)")
            #expect(!text.contains("secret"))
        }
        #expect(DownloadError.checksumMismatch.localizedDescription == "the file does not have the expected checksum")
        #expect(DownloadError.stalled.errorDescription == "the transfer stalled")
        await manager.shutdown()
    }
}

extension URL {
    /// The URL with user and password.
    fileprivate func withCredentials(_ user: String, _ password: String) -> URL {
        var components = URLComponents(url: self, resolvingAgainstBaseURL: false)!
        components.user = user
        components.password = password
        return components.url!
    }
}
