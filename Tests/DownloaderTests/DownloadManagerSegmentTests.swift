import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Segmented downloads through the manager: the default from `Configuration`, one active download however many
/// connections it opens, retries that resume segments.
@Suite("DownloadManager segments")
final class DownloadManagerSegmentTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var directory: URL { workspace.directory.appendingPathComponent("manager") }

    init() throws {
        workspace = try TestWorkspace()
    }

    func makeManager(maximumActive: Int = 4, connections: Int = 1) throws -> DownloadManager {
        var configuration = DownloadManager.Configuration.forTests(directory: directory, maximumActive: maximumActive)
        configuration.connectionsPerDownload = connections
        configuration.minimumSegmentSize = 256 << 10
        return try DownloadManager(configuration: configuration)
    }

    @Test("Configuration.connectionsPerDownload is the default; a segmented download counts as one active download")
    func countsAsOne() async throws {
        let manager = try makeManager(maximumActive: 1, connections: 4)
        let size = 2 << 20
        // Each download's segments wait until four of them have arrived: only four connections at once get through.
        let first = server.url("/bytes/one?size=\(size)&gate=one&gateSize=4&gateFrom=16384")
        let second = server.url("/bytes/two?size=\(size)&gate=two&gateSize=4&gateFrom=16384")
        await manager.enqueue(first)
        await manager.enqueue(second)
        let receipts = [try await manager.download(first), try await manager.download(second)]
        #expect(
            receipts.map(\.md5) == [
                TestContent(name: "one", size: size).md5.hexString, TestContent(name: "two", size: size).md5.hexString,
            ])
        // With one active download allowed, the second began after the first's last request.
        let requests = server.requests.filter { $0.method == "GET" }
        let lastOfFirst = try #require(requests.lastIndex { $0.path == "/bytes/one" })
        let firstOfSecond = try #require(requests.firstIndex { $0.path == "/bytes/two" })
        #expect(lastOfFirst < firstOfSecond)
        #expect(requests.filter { $0.path == "/bytes/one" }.count == 5)
        await manager.shutdown()
    }

    @Test("A receipt counts its download's requests in flight: four held segments are 4, a completed download 0")
    func activeConnectionsCounted() async throws {
        let manager = try makeManager(connections: 4)
        let size = 2 << 20
        // The segments after the first window are held until the test opens the gate.
        let url = server.url("/bytes/counted?size=\(size)&gate=counted&gateSize=1000&gateFrom=16384")
        let download = Task { try await manager.download(url) }
        let deadline = TestTime.deadline(in: .seconds(300))  // a bound, not a pace
        var seen = 0
        while seen < 4 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            seen = await manager.receipt(for: url)?.activeConnections ?? 0
        }
        #expect(seen == 4, "held segments: \(server.requests.map { $0.range ?? "-" })")
        let snapshot = try #require(await manager.snapshot(for: url))
        #expect(snapshot.activeConnections == 4)
        server.openGate("counted")
        let receipt = try await download.value
        #expect(receipt.state == .completed && receipt.activeConnections == 0)
        #expect(await manager.receipt(for: url)?.activeConnections == 0)
        #expect(await manager.snapshot(for: url)?.activeConnections == nil)
        await manager.shutdown()
    }

    @Test("A segment dropped mid-way is retried by the manager, which fetches only the missing bytes")
    func droppedSegmentRetried() async throws {
        let manager = try makeManager(connections: 4)
        let size = 3 << 20
        let url = server.url("/bytes/retried?size=\(size)&dropAt=\(2 << 20)")
        let receipt = try await manager.download(url, options: DownloadOptions(connections: 3))
        #expect(receipt.md5 == TestContent(name: "retried", size: size).md5.hexString)
        #expect(server.statistics.bodyBytesSent == Int64(size), "no byte fetched twice")
        #expect(server.requests.contains { $0.method == "HEAD" }, "the retry resumed")
        await manager.shutdown()
    }
}
