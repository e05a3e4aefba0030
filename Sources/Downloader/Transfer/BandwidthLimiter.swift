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

/// The schedule of a bandwidth limit: each request for `n` bytes may start once the requests before it have had
/// their share of time at the limit (virtual scheduling, no burst allowance). A pure value: the caller brings the
/// clock.
///
/// URLSession on Linux cannot slow a response down (it reads the socket as fast as data comes), so a limit is kept by
/// pacing Range windows: small windows (a quarter of a second at the limit) that start no earlier than the schedule
/// allows. The average rate stays at or under the limit; within a window the server's own speed shows.
struct BandwidthSchedule: Sendable, Equatable {
    /// The limit, in bytes per second (at least 1); `nil` for none (every request may start at once).
    private(set) var bytesPerSecond: Int?
    /// The moment (nanoseconds, the caller's clock) from which the next request may start.
    private(set) var nextStart: UInt64 = 0

    /// Creates a schedule.
    /// - Parameter bytesPerSecond: the limit; values below 1 count as 1; `nil` for none.
    init(bytesPerSecond: Int?) {
        self.bytesPerSecond = bytesPerSecond.map { max(1, $0) }
    }

    /// The window size that keeps a paced transfer smooth: a quarter of a second at the limit, at least 16 KiB;
    /// `nil` without a limit.
    var windowSize: Int64? { bytesPerSecond.map { max(16 << 10, Int64($0 / 4)) } }

    /// Changes the limit from now on: requests booked before keep their start; the next one starts no earlier than
    /// the last booked one would have ended at the old limit, and then goes at the new one.
    /// - Parameter bytesPerSecond: the new limit (at least 1), or `nil` for none.
    mutating func change(to bytesPerSecond: Int?) {
        self.bytesPerSecond = bytesPerSecond.map { max(1, $0) }
    }

    /// Books `bytes` and says how long to wait before asking for them.
    /// - Parameters:
    ///   - bytes: the size of the request.
    ///   - now: the current time in nanoseconds.
    /// - Returns: nanoseconds to wait (0: start now).
    mutating func reserve(_ bytes: Int64, now: UInt64) -> UInt64 {
        guard let bytesPerSecond else {
            nextStart = max(now, nextStart)
            return 0
        }
        let start = max(now, nextStart)
        let duration = Double(max(0, bytes)) / Double(bytesPerSecond) * 1e9
        nextStart = start &+ UInt64(min(duration, 1e18))
        return start - now
    }
}
