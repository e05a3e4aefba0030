import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Issue #36: a signed link expires mid-download; `changeURL(of:to:)` gives the download a fresh one, and its bytes
/// continue when the server proves the same file.
@Suite("DownloadManager.changeURL")
final class DownloadManagerNewURLTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }

    init() throws {
        workspace = try TestWorkspace()
    }

    func makeManager() throws -> DownloadManager {
        try DownloadManager(configuration: .forTests(directory: workspace.directory, retryLimit: 1))
    }

    @Test("A failed download given a fresh link continues by Range from it, keeps its identity, and verifies")
    func failedContinues() async throws {
        let size = 400_000
        let expired = server.url("/bytes/link.bin?size=\(size)&sig=1&sigUses=1&drop=150000")
        let manager = try makeManager()
        // What the download went through, for the message of a failure (CI once saw it end neither completed nor
        // failed within 60 s under ThreadSanitizer on a loaded machine).
        let events = await manager.events(for: expired)
        let seen = Locked<[String]>([])
        let recorder = Task {
            for await event in events {
                if case .progress = event { continue }
                seen.withLock { $0.append("\(event)") }
            }
        }
        defer { recorder.cancel() }
        await #expect(throws: DownloadError.httpStatus) { try await manager.download(expired) }
        let failed = try #require(await manager.receipt(for: expired))
        #expect(failed.state == .failed && failed.totalBytesWritten > 0, "\(failed)")

        let fresh = server.url("/bytes/link.bin?size=\(size)&sig=2&sigUses=100")
        let changed = try await manager.changeURL(of: expired, to: fresh)
        #expect(changed?.url == expired && changed?.identifier == failed.identifier)
        // Completed: looked at every 20 ms up to a deadline, not a bound (a new failure shows as a timeout, its
        // receipt and events).
        let deadline = TestTime.deadline(in: .seconds(300))
        var end = await manager.receipt(for: expired)
        while end?.state != .completed && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            end = await manager.receipt(for: expired)
        }
        #expect(end?.state == .completed, "\(String(describing: end)); events: \(seen.withLock { $0 })")
        let receipt = try #require(await manager.receipt(for: expired))
        #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "link.bin", size: size).md5)
        let freshGets = server.statistics.requests(path: "/bytes/link.bin").filter {
            $0.method == "GET" && $0.target.contains("sig=2")
        }
        #expect(!freshGets.isEmpty && freshGets.allSatisfy { ($0.rangeStart ?? 0) > 0 }, "\(freshGets.map(\.range))")
        #expect(await manager.allReceipts.count == 1)
        await manager.shutdown()

        // Saved with it: a new manager knows the fresh link as the download's first mirror.
        let again = try makeManager()
        #expect(await again.receipt(for: expired)?.state == .completed)
        await again.shutdown()
    }

    @Test("An unknown or completed download is not changed; a URL that cannot be downloaded is refused")
    func refusals() async throws {
        let manager = try makeManager()
        let unknown = server.url("/bytes/unknown?size=10")
        #expect(try await manager.changeURL(of: unknown, to: server.url("/bytes/x?size=10")) == nil)
        let done = server.url("/bytes/done?size=1000")
        _ = try await manager.download(done)
        #expect(try await manager.changeURL(of: done, to: server.url("/bytes/done?size=1000&mirror=2")) == nil)
        await #expect(throws: DownloadError.unsupportedScheme) {
            try await manager.changeURL(of: done, to: URL(string: "ftp://127.0.0.1/x")!)
        }
        await manager.shutdown()
    }
}
