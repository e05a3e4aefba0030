import Foundation

/// The schedule of a bandwidth limit: each request for `n` bytes may start once the requests before it have had
/// their share of time at the limit (virtual scheduling, no burst allowance). A pure value: the caller brings the
/// clock.
///
/// URLSession on Linux cannot slow a response down (it reads the socket as fast as data comes), so a limit is kept by
/// pacing Range windows: small windows (a quarter of a second at the limit) that start no earlier than the schedule
/// allows. The average rate stays at or under the limit; within a window the server's own speed shows.
struct BandwidthSchedule: Sendable, Equatable {
    /// The limit, in bytes per second (at least 1).
    let bytesPerSecond: Int
    /// The moment (nanoseconds, the caller's clock) from which the next request may start.
    private(set) var nextStart: UInt64 = 0

    /// Creates a schedule.
    /// - Parameter bytesPerSecond: the limit; values below 1 count as 1.
    init(bytesPerSecond: Int) {
        self.bytesPerSecond = max(1, bytesPerSecond)
    }

    /// The window size that keeps a paced transfer smooth: a quarter of a second at the limit, at least 16 KiB.
    var windowSize: Int64 { max(16 << 10, Int64(bytesPerSecond / 4)) }

    /// Books `bytes` and says how long to wait before asking for them.
    /// - Parameters:
    ///   - bytes: the size of the request.
    ///   - now: the current time in nanoseconds.
    /// - Returns: nanoseconds to wait (0: start now).
    mutating func reserve(_ bytes: Int64, now: UInt64) -> UInt64 {
        let start = max(now, nextStart)
        let duration = Double(max(0, bytes)) / Double(bytesPerSecond) * 1e9
        nextStart = start &+ UInt64(min(duration, 1e18))
        return start - now
    }
}
