import Foundation

/// A bandwidth limit shared by the transfers that use it (one per download, one per manager).
final class BandwidthLimiter: Sendable {
    private let schedule: Locked<BandwidthSchedule>

    /// Creates a limiter.
    /// - Parameter bytesPerSecond: the limit; values below 1 count as 1; `nil` for none until `change(to:)` sets one.
    init(bytesPerSecond: Int?) {
        schedule = Locked(BandwidthSchedule(bytesPerSecond: bytesPerSecond))
    }

    /// The limit now, in bytes per second; `nil` for none.
    var bytesPerSecond: Int? { schedule.withLock { $0.bytesPerSecond } }

    /// The window size that keeps a transfer under this limit smooth; `nil` without a limit.
    var windowSize: Int64? { schedule.withLock { $0.windowSize } }

    /// Changes the limit for every request booked from now on (a transfer's window size stays as it began).
    /// - Parameter bytesPerSecond: the new limit, or `nil` for none.
    func change(to bytesPerSecond: Int?) {
        schedule.withLock { $0.change(to: bytesPerSecond) }
    }

    /// Books `bytes` and waits until they may be requested.
    /// - Parameter bytes: the size of the request.
    /// - Throws: `CancellationError` when the task is cancelled while it waits.
    func wait(for bytes: Int64) async throws {
        let delay = schedule.withLock { $0.reserve(bytes, now: DispatchTime.now().uptimeNanoseconds) }
        if delay > 0 { try await Task.sleep(nanoseconds: delay) }
    }
}
