import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

extension TransferTests {
    /// The length of each GET's `Range` for a test resource, in order.
    func requestedLengths(_ name: String) -> [Int64] {
        gets(name).compactMap { request -> Int64? in
            guard let range = request.range?.dropFirst("bytes=".count).split(separator: "-"), range.count == 2,
                let first = Int64(range[0]), let last = Int64(range[1])
            else { return nil }
            return last - first + 1
        }
    }

    /// Makes every response to a `paced=1` URL wait, before each chunk, until the disk has written everything before
    /// it (an event, with a deadline that only a broken engine reaches): the network is the slower side. From `until`
    /// on, it no longer waits. Returns the progress callback that tells it what the disk has written.
    func diskKeepsUp(until: Int64 = .max) -> @Sendable (Int64, Int64?) -> Void {
        let written = Locked<Int64>(0)
        server.setBeforeChunk { offset, _ in
            guard Int64(offset) < until else { return }
            let deadline = TestTime.deadline(in: .seconds(30))
            while written.withLock({ $0 }) < Int64(offset) && ContinuousClock.now < deadline {
                usleep(500)  // polling an event with a deadline, not a delay
            }
        }
        return { bytes, _ in written.withLock { $0 = max($0, bytes) } }
    }

    @Test("Windows the disk keeps up with grow to the maximum: fewer round trips on a long link")
    func windowsGrow() async throws {
        let size = 12 << 20
        var configuration = Transfer.Configuration(
            windowSize: 256 << 10, firstWindowSize: 16 << 10, firstRequestBudget: nil)
        configuration.maximumWindowSize = 4 << 20
        // A hash stage that lags on a loaded machine keeps the windows from growing (hashing, not the disk, is then
        // the slower side): here it may hold the whole file, so that only the disk decides.
        configuration.hashBacklogLimit = Int64(size)
        let transfer = Transfer(
            url: server.url("/bytes/grow?size=\(size)&paced=1"), options: DownloadOptions(),
            directory: directory, bridge: bridge, configuration: configuration, progress: diskKeepsUp())
        let result = try await transfer.run()
        #expect(result.md5 == TestContent(name: "grow", size: size).md5)
        let lengths = requestedLengths("grow")
        // 16 KiB, 256 KiB, 1 MiB, then 4 MiB windows, and the tail.
        #expect(Array(lengths.prefix(4)) == [16 << 10, 256 << 10, 1 << 20, 4 << 20], "\(lengths)")
        #expect(lengths.dropFirst(3).dropLast().allSatisfy { $0 == 4 << 20 }, "\(lengths)")
        #expect(lengths.reduce(0, +) == Int64(size))
    }

    @Test("A grown window the disk falls behind on ends early: memory stays within 1.5 base windows")
    func grownWindowCutWhenTheDiskFallsBehind() async throws {
        // The disk keeps up until 2 MiB are written (the windows grow to 4 MiB), then stops while a response is in
        // flight: the grown window that follows must end once 384 KiB wait, and the rest comes in base windows.
        let size = 8 << 20
        let window: Int64 = 256 << 10
        var configuration = Transfer.Configuration(
            windowSize: window, firstWindowSize: 16 << 10, firstRequestBudget: nil)
        configuration.maximumWindowSize = 4 << 20
        let keepUp = diskKeepsUp(until: 2 << 20)
        let stop = diskStoppedWhileResponding()
        let transfer = Transfer(
            url: server.url("/bytes/cut?size=\(size)&paced=1"), options: DownloadOptions(),
            directory: directory, bridge: bridge, configuration: configuration,
            progress: { written, total in
                keepUp(written, total)
                if written >= 2 << 20 { stop(written, total) }
            })
        let result = try await transfer.run()
        #expect(result.md5 == TestContent(name: "cut", size: size).md5)
        #expect(try md5OfFile(result.fileURL) == TestContent(name: "cut", size: size).md5)
        let lengths = requestedLengths("cut")
        #expect(lengths.contains { $0 > window }, "the windows grew first: \(lengths)")
        // After the cut, base windows again (they may grow once more later, when the disk keeps up with one).
        let grown = lengths.firstIndex { $0 > window } ?? lengths.endIndex
        #expect(lengths[grown...].contains(window), "and came back to the base: \(lengths)")
        // Unwritten bytes stop at 1.5 windows, and the bytes that still arrive after the cut are kept up to twice
        // that (`WindowEndRule.lateDataLimit`), give or take a chunk; without the cut the 4 MiB window would hold over
        // 3 MiB. (What the hasher has not yet taken comes on top, up to its backlog limit.)
        #expect(result.peakUnwrittenBytes <= window * 3 + (64 << 10), "\(result.peakUnwrittenBytes) unwritten")
        #expect(result.peakUnwrittenBytes > window, "the disk really fell behind")
    }
}
