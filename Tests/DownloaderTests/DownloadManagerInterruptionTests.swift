import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// The restart policy (issue #35): a download its process stopped — a shutdown, a crash — is *interrupted* and can
/// continue on its own at the next start; a download a caller suspended stays suspended.
@Suite("DownloadManager restart policy")
final class DownloadManagerInterruptionTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var directory: URL { workspace.directory }

    init() throws {
        workspace = try TestWorkspace()
    }

    func makeManager(in folder: URL? = nil, continuing: Bool = false) throws -> DownloadManager {
        var configuration = DownloadManager.Configuration.forTests(directory: folder ?? directory, maximumActive: 1)
        configuration.continuesInterruptedDownloads = continuing
        return try DownloadManager(configuration: configuration)
    }

    /// A URL whose first GET stops for a minute after 100,000 body bytes (later GETs run through).
    func heldURL(_ name: String) -> URL {
        server.url("/bytes/\(name)?size=400000&stallAfter=100000&stall=60&stallCount=1&stallReached=1")
    }

    /// Waits until `url` is in `state`, looking every 20 ms up to a deadline; the receipt as last seen.
    func receipt(
        of url: URL, in manager: DownloadManager, reaching state: DownloadState, within limit: Duration = .seconds(60)
    ) async -> DownloadReceipt? {
        let deadline = TestTime.deadline(in: limit)
        while true {
            let receipt = await manager.receipt(for: url)
            if receipt?.state == state || ContinuousClock.now >= deadline { return receipt }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// One running download (held by the server), one the caller paused, one waiting for the slot.
    func startThree(in manager: DownloadManager) async -> (running: URL, paused: URL, waiting: URL) {
        let running = heldURL("running")
        let paused = server.url("/bytes/paused?size=30000")
        let waiting = server.url("/bytes/waiting?size=30000")
        await manager.enqueue(running)
        #expect(await server.waitUntil { $0.bodyBytesSent >= 100_000 })
        // Bytes on disk, not only sent (a slow client lags the server), so that a continuation must use Range.
        let deadline = TestTime.deadline(in: .seconds(60))
        while await (manager.receipt(for: running)?.totalBytesWritten ?? 0) < 16_384, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        await manager.enqueue(paused)
        await manager.suspend(paused)
        await manager.enqueue(waiting)
        #expect(await manager.receipt(for: waiting)?.state == .queued)
        return (running, paused, waiting)
    }

    @Test("Shutdown marks what was running or waiting as interrupted, never what a caller paused")
    func shutdownInterrupts() async throws {
        let first = try makeManager()
        let (running, paused, waiting) = await startThree(in: first)
        #expect(await first.receipt(for: running)?.isInterrupted == false)
        await first.shutdown()

        // Default: nothing continues on its own; the receipts say which is which.
        let second = try makeManager()
        for url in [running, waiting] {
            let receipt = try #require(await second.receipt(for: url))
            #expect(receipt.state == .suspended && receipt.isInterrupted, "\(receipt)")
            #expect(await second.snapshot(for: url)?.isInterrupted == true)
        }
        let pausedReceipt = try #require(await second.receipt(for: paused))
        #expect(pausedReceipt.state == .suspended && !pausedReceipt.isInterrupted, "\(pausedReceipt)")

        // A caller's suspend of an interrupted download makes it the caller's pause, kept across the next restart.
        await second.suspend(waiting)
        #expect(await second.receipt(for: waiting)?.isInterrupted == false)
        await second.shutdown()
        let third = try makeManager()
        #expect(await third.receipt(for: waiting)?.isInterrupted == false)
        #expect(await third.receipt(for: running)?.isInterrupted == true, "a manager that ran nothing keeps the mark")
        await third.shutdown()
    }

    @Test("continuesInterruptedDownloads continues the interrupted downloads by Range; the paused one stays")
    func interruptedDownloadsContinue() async throws {
        let first = try makeManager()
        let (running, paused, waiting) = await startThree(in: first)
        await first.shutdown()
        server.resetStatistics()

        let second = try makeManager(continuing: true)
        let finished = await receipt(of: running, in: second, reaching: .completed)
        #expect(finished?.state == .completed, "\(String(describing: finished))")
        #expect(finished?.isInterrupted == false)
        #expect(await receipt(of: waiting, in: second, reaching: .completed)?.state == .completed)
        let resumedFrom = server.statistics.requests(path: "/bytes/running").compactMap(\.rangeStart).min()
        #expect(
            (resumedFrom ?? 0) >= 16_384,
            "continued from its partial file, not from 0: \(String(describing: resumedFrom))")
        let pausedReceipt = try #require(await second.receipt(for: paused))
        #expect(pausedReceipt.state == .suspended && !pausedReceipt.isInterrupted, "\(pausedReceipt)")
        #expect(server.statistics.requests(path: "/bytes/paused").isEmpty, "a caller's pause was continued")
        await second.shutdown()
    }

    @Test("A crash (the files as kill -9 leaves them) interrupts; resumeInterrupted() continues only those")
    func crashInterrupts() async throws {
        let first = try makeManager()
        let (running, paused, waiting) = await startThree(in: first)
        await first.saveReceiptsNow()
        let crash = try TemporaryDirectory()
        defer { crash.remove() }
        try copyAsCrashLeavesIt(
            directory.appendingPathComponent(".downloader"), to: crash.url.appendingPathComponent(".downloader"))
        await first.shutdown()

        let second = try makeManager(in: crash.url)
        #expect(await second.receipt(for: running)?.isInterrupted == true)
        #expect(await second.receipt(for: waiting)?.isInterrupted == true)
        #expect(await second.receipt(for: paused)?.isInterrupted == false)
        await second.resumeInterrupted()
        #expect(await receipt(of: running, in: second, reaching: .completed)?.state == .completed)
        #expect(await receipt(of: waiting, in: second, reaching: .completed)?.state == .completed)
        #expect(await second.receipt(for: paused)?.state == .suspended)
        await second.shutdown()
    }
}
