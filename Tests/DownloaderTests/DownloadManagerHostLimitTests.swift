import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Connections per host over all downloads (issue #34): the manager's cap, and a host that refuses a third
/// connection with `503` while two are served (nginx `limit_conn 2`).
@Suite("DownloadManager connections per host")
final class DownloadManagerHostLimitTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var directory: URL { workspace.directory.appendingPathComponent("manager") }

    init() throws {
        workspace = try TestWorkspace()
    }

    func makeManager(
        maximumActive: Int, retryLimit: Int, connectionsPerHost: Int? = nil,
        stallTimeout: TimeInterval = TestTime.stallTimeout
    ) throws -> DownloadManager {
        var configuration = DownloadManager.Configuration.forTests(
            directory: directory, maximumActive: maximumActive, retryLimit: retryLimit, stallTimeout: stallTimeout)
        configuration.maximumConnectionsPerHost = connectionsPerHost
        return try DownloadManager(configuration: configuration)
    }

    /// Downloads every URL at once and returns each one's result, in order.
    func downloadAll(_ urls: [URL], with manager: DownloadManager) async -> [Result<DownloadReceipt, DownloadError>] {
        await withTaskGroup(of: (Int, Result<DownloadReceipt, DownloadError>).self) { group in
            for (index, url) in urls.enumerated() {
                group.addTask {
                    do {
                        return (index, .success(try await manager.download(url)))
                    } catch {
                        return (index, .failure(error as? DownloadError ?? .cancelled(url)))
                    }
                }
            }
            var results = [Result<DownloadReceipt, DownloadError>?](repeating: nil, count: urls.count)
            for await (index, result) in group { results[index] = result }
            return results.map { $0! }
        }
    }

    /// Downloads every URL at once and expects each file right: the URL at index i serves `NAMEi` of `size` bytes.
    func expectEveryFile(_ urls: [URL], named name: String, size: Int, with manager: DownloadManager) async throws {
        for (index, result) in await downloadAll(urls, with: manager).enumerated() {
            let receipt = try result.get()
            #expect(receipt.md5 == TestContent(name: "\(name)\(index)", size: size).md5.hexString)
        }
    }

    @Test("A host that refuses a third connection with 503 gets every file, and no file spends a retry")
    func refusedConnectionsAreNotRetries() async throws {
        // No retries at all: a refusal counted as one would fail its file. The held requests wait for a third one to
        // be refused, which a loaded machine can delay past 10 s: no stall may cut them meanwhile.
        let manager = try makeManager(maximumActive: 8, retryLimit: 0, stallTimeout: 600)
        let size = 256 << 10
        // Two requests are served at once; each accepted one is held until a third has been refused, so the
        // overlap happens whatever the timing.
        let urls = (0..<8).map { server.url("/bytes/busy\($0)?size=\(size)&busyAbove=2&holdUntilBusy=1") }
        try await expectEveryFile(urls, named: "busy", size: size, with: manager)
        #expect(server.statistics.refusedRequests >= 1, "the server refused connections")
        await manager.shutdown()
    }

    @Test("Configuration.maximumConnectionsPerHost: never more requests to one host at once, over all downloads")
    func capHolds() async throws {
        let manager = try makeManager(maximumActive: 6, retryLimit: 0, connectionsPerHost: 2)
        let size = 64 << 10
        // Slow bodies, so that six downloads without a cap would overlap; a third request at once is refused.
        let urls = (0..<6).map { server.url("/bytes/capped\($0)?size=\(size)&rate=\(512 << 10)&busyAbove=2") }
        try await expectEveryFile(urls, named: "capped", size: size, with: manager)
        #expect(server.statistics.refusedRequests == 0, "never a third request at once")
        #expect(server.statistics.peakActiveRequests <= 2)
        await manager.shutdown()
    }

    @Test("A 503 with nothing else in flight is the server's answer: it spends the download's retries as before")
    func lone503IsARetry() async throws {
        let manager = try makeManager(maximumActive: 4, retryLimit: 0)
        let url = server.url("/bytes/alone?size=1024&status=503&statusCount=1")
        await #expect(throws: DownloadError.self) { try await manager.download(url) }
        #expect(server.statistics.requests(path: "/bytes/alone").count == 1, "not asked again")
        await manager.shutdown()
    }

    @Test("A download waiting for its host's turn is suspended at once, without a request, while the other runs on")
    func suspendWhileWaitingForATurn() async throws {
        // The first holds the host's only turn: its body stalls after 1,000 bytes for as long as the test runs (the
        // watchdog's limit is longer than any loaded machine's delay, so the holder is never closed meanwhile).
        let manager = try makeManager(maximumActive: 4, retryLimit: 0, connectionsPerHost: 1, stallTimeout: 600)
        let holder = server.url("/bytes/holder?size=100000&stallAfter=1000&stall=600")
        let waiting = server.url("/bytes/waiting?size=1000")
        await manager.enqueue(holder)
        #expect(await server.waitUntil { $0.stallsBegun >= 1 })
        let outcome = Task { try await manager.download(waiting) }
        // Active for the manager, but its request waits at the gate.
        let deadline = TestTime.deadline(in: .seconds(30))
        while await manager.receipt(for: waiting)?.state != .downloading, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))  // polling a state with a deadline, not a delay
        }
        await manager.suspend(waiting)
        await #expect(throws: DownloadError.suspended) { try await outcome.value }
        // It ended while the holder still stalls: the wait was cut, not served.
        #expect(server.statistics.stallsBegun == 1 && server.statistics.activeRequests == 1)
        #expect(server.statistics.requests(path: "/bytes/waiting").isEmpty, "never asked")
        #expect(await manager.receipt(for: holder)?.state == .downloading)
        await manager.shutdown()
    }
}
