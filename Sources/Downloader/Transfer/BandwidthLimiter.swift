import Foundation

/// A bandwidth limit shared by the transfers that use it (one per download, one per manager).
final class BandwidthLimiter: Sendable {
    private let schedule: Locked<BandwidthSchedule>

    /// The limit, in bytes per second.
    let bytesPerSecond: Int

    /// Creates a limiter.
    /// - Parameter bytesPerSecond: the limit; values below 1 count as 1.
    init(bytesPerSecond: Int) {
        let schedule = BandwidthSchedule(bytesPerSecond: bytesPerSecond)
        self.bytesPerSecond = schedule.bytesPerSecond
        self.schedule = Locked(schedule)
    }

    /// The window size that keeps a transfer under this limit smooth.
    var windowSize: Int64 { schedule.withLock { $0.windowSize } }

    /// Books `bytes` and waits until they may be requested.
    /// - Parameter bytes: the size of the request.
    /// - Throws: `CancellationError` when the task is cancelled while it waits.
    func wait(for bytes: Int64) async throws {
        let delay = schedule.withLock { $0.reserve(bytes, now: DispatchTime.now().uptimeNanoseconds) }
        if delay > 0 { try await Task.sleep(nanoseconds: delay) }
    }
}
