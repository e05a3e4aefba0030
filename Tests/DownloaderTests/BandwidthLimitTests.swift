import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Bandwidth limits: the schedule as a value, then paced downloads over real sockets.
@Suite("Bandwidth limit")
final class BandwidthLimitTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var temporary: TemporaryDirectory { TemporaryDirectory(existing: workspace.directory) }

    init() throws {
        workspace = try TestWorkspace()
    }

    @Test("Requests start no earlier than their share of time at the limit")
    func schedule() {
        var schedule = BandwidthSchedule(bytesPerSecond: 1000)
        #expect(schedule.reserve(250, now: 0) == 0)
        #expect(schedule.reserve(250, now: 0) == 250_000_000)
        #expect(schedule.reserve(500, now: 100_000_000) == 400_000_000)
        // An idle spell is not saved up as a burst.
        #expect(schedule.reserve(100, now: 10_000_000_000) == 0)
        #expect(schedule.reserve(100, now: 10_000_000_000) == 100_000_000)
        #expect(BandwidthSchedule(bytesPerSecond: 0).bytesPerSecond == 1)
        #expect(BandwidthSchedule(bytesPerSecond: 1000).windowSize == 16 << 10)
        #expect(BandwidthSchedule(bytesPerSecond: 4 << 20).windowSize == 1 << 20)
    }

    @Test("A limit set, changed and lifted later applies from the next request on (issue #50: changeGlobalOption)")
    func scheduleChanges() {
        var schedule = BandwidthSchedule(bytesPerSecond: nil)
        #expect(schedule.windowSize == nil)
        #expect(schedule.reserve(1 << 30, now: 0) == 0 && schedule.reserve(1 << 30, now: 0) == 0, "no limit")
        schedule.change(to: 1000)
        #expect(schedule.windowSize == 16 << 10)
        #expect(schedule.reserve(500, now: 1_000) == 0)
        #expect(schedule.reserve(500, now: 1_000) == 500_000_000)
        schedule.change(to: 2000)
        // Booked before: kept; the next request goes at the new limit after them.
        #expect(schedule.reserve(1000, now: 1_000) == 1_000_000_000)
        #expect(schedule.reserve(0, now: 1_000) == 1_500_000_000)
        schedule.change(to: nil)
        #expect(schedule.reserve(1 << 20, now: 2_000_000_000) == 0)
    }

    @Test("Seeded random requests: the bytes started by any moment never exceed the limit's share plus one request")
    func scheduleInvariant() {
        var random = SeededGenerator(seed: 14)
        for _ in 0..<200 {
            let rate = Int.random(in: 1...10_000_000, using: &random)
            var schedule = BandwidthSchedule(bytesPerSecond: rate)
            var now: UInt64 = 0
            var first: UInt64?
            var started: Int64 = 0
            for _ in 0..<100 {
                now += UInt64.random(in: 0...50_000_000, using: &random)
                let bytes = Int64.random(in: 1...Int64(rate), using: &random)
                let start = now + schedule.reserve(bytes, now: now)
                first = first ?? start
                // Everything before this request was booked at the limit from the first start on.
                let allowed = Double(start - first!) / 1e9 * Double(rate)
                #expect(Double(started) <= allowed + 1, "rate \(rate)")
                started += bytes
            }
        }
    }

    @Test("A download limited to 1 MiB/s is never faster than the limit, and the file is right")
    func perDownload() async throws {
        let manager = try DownloadManager(configuration: .forTests(directory: temporary.url))
        let url = server.url("/bytes/paced?size=\(3 << 20)")
        let clock = ContinuousClock()
        let began = clock.now
        let receipt = try await manager.download(url, options: DownloadOptions(maximumBytesPerSecond: 1 << 20))
        let seconds = (clock.now - began) / .seconds(1)
        #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "paced", size: 3 << 20).md5)
        // The schedule forbids finishing before (size − one window) ÷ rate = 2.75 s. How close to 3 s it gets is
        // measured by the dl timing test, alone (a loaded machine only makes this slower).
        #expect(seconds >= 2.7, "\(seconds) s")
        #expect(server.requests.filter { $0.method == "GET" }.count >= 12, "quarter-second windows")
        await manager.shutdown()
    }

    @Test("The manager's limit is shared by all its downloads")
    func perManager() async throws {
        var configuration = DownloadManager.Configuration.forTests(directory: temporary.url)
        configuration.maximumBytesPerSecond = 1 << 20
        let manager = try DownloadManager(configuration: configuration)
        let urls = (0..<3).map { server.url("/bytes/shared\($0)?size=\(1 << 20)") }
        let clock = ContinuousClock()
        let began = clock.now
        for url in urls { await manager.enqueue(url) }
        for url in urls { _ = try await manager.download(url) }
        let seconds = (clock.now - began) / .seconds(1)
        #expect(seconds >= 2.7, "3 MiB at 1 MiB/s together: \(seconds) s")
        await manager.shutdown()
    }

    @Test("setMaximumBytesPerSecond limits a manager made without a limit, and nil lifts it (issue #50)")
    func setAtRunTime() async throws {
        let manager = try DownloadManager(configuration: .forTests(directory: temporary.url))
        #expect(await manager.maximumBytesPerSecond == nil)
        await manager.setMaximumBytesPerSecond(1 << 20)
        #expect(await manager.maximumBytesPerSecond == 1 << 20)
        let limited = server.url("/bytes/later?size=\(2 << 20)")
        let clock = ContinuousClock()
        let began = clock.now
        let receipt = try await manager.download(limited)
        let seconds = (clock.now - began) / .seconds(1)
        #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "later", size: 2 << 20).md5)
        #expect(seconds >= 1.7, "2 MiB at 1 MiB/s: \(seconds) s")
        #expect(server.requests.filter { $0.path == "/bytes/later" }.count >= 8, "quarter-second windows")
        await manager.setMaximumBytesPerSecond(nil)
        #expect(await manager.maximumBytesPerSecond == nil)
        let free = server.url("/bytes/free?size=\(2 << 20)")
        _ = try await manager.download(free)
        #expect(server.requests.filter { $0.path == "/bytes/free" }.count <= 2, "whole windows again")
        await manager.shutdown()
    }
}
