import Dispatch
import Foundation

/// The watchdog's ticks, and the time between two of them that nobody watched.
///
/// The watchdog ticks every `interval` on the bridge's control queue. A tick that comes much later than that means the
/// process did not run — stopped (SIGSTOP, Ctrl-Z), frozen by a machine that stalled, or its control queue held — and
/// neither did URLSession's threads, which would have delivered what the server sent meanwhile: such time is no
/// evidence that a request stalled, and the stall clocks do not count it (a request stopped for 8 s with a 4-s timeout
/// was closed and retried the moment the process continued, before its waiting bytes were read).
struct WatchdogTicks: Sendable, Equatable {
    /// The ticks' period, in nanoseconds.
    let interval: UInt64
    /// How much later than `interval` a tick may come and still count as watched time, in nanoseconds (a loaded
    /// machine delays timers by some milliseconds, not by a second).
    let tolerance: UInt64
    /// When the last tick came, or the watch began (a monotonic time in nanoseconds).
    private(set) var last: UInt64

    /// Ticks every `interval` nanoseconds from `start`, tolerating `tolerance` (default a second) of lateness.
    /// - Parameters:
    ///   - interval: the ticks' period, in nanoseconds.
    ///   - tolerance: how late a tick may come and still count as watched time, in nanoseconds.
    ///   - start: when the watch begins: a first tick long after it (the process stopped before its first second)
    ///     leaves time unwatched too.
    init(interval: UInt64, tolerance: UInt64 = 1_000_000_000, start: UInt64) {
        self.interval = interval
        self.tolerance = tolerance
        last = start
    }

    /// A tick came.
    /// - Parameter now: a monotonic time in nanoseconds.
    /// - Returns: the nanoseconds since the last tick that nobody watched: 0 for a tick on time (within
    ///   `tolerance`), else all of the gap but one interval.
    mutating func tick(now: UInt64) -> UInt64 {
        defer { last = max(last, now) }
        guard now > last else { return 0 }
        let gap = now - last
        guard gap > interval + tolerance else { return 0 }
        return gap - interval
    }
}

extension SessionBridge {
    /// Closes requests that received nothing for `stallTimeout` (or less than the lowest speed over its interval),
    /// releases callers of closed requests whose completion never came (5 s after the close), and lets time raise
    /// hosts' lowered connection limits. Time nobody watched (`WatchdogTicks`) counts for none of the requests' clocks.
    /// - Parameter now: a monotonic time in nanoseconds (tests give their own).
    func checkForStalls(now: UInt64 = DispatchTime.now().uptimeNanoseconds) {
        gate.tick()
        let limit = UInt64(configuration.stallTimeout * 1e9)
        let grace: UInt64 = 5_000_000_000
        let lowestSpeed = configuration.lowestSpeed
        let (stalled, abandoned) = state.withLock { state -> ([(Int, DownloadError)], [Entry]) in
            let unwatched = state.ticks.tick(now: now)
            var stalled: [(Int, DownloadError)] = []
            var abandoned: [Entry] = []
            for (id, var entry) in state.entries {
                if entry.request.isOpen {
                    if unwatched > 0 {
                        entry.lastActivity = min(now, entry.lastActivity + unwatched)
                        entry.speedIntervalStart = min(now, entry.speedIntervalStart + unwatched)
                        state.entries[id] = entry
                    }
                    if now > entry.lastActivity && now - entry.lastActivity > limit {
                        stalled.append((id, .stalled(entry.originalURL, seconds: configuration.stallTimeout)))
                    } else if let lowestSpeed, now > entry.speedIntervalStart,
                        Double(now - entry.speedIntervalStart) >= lowestSpeed.seconds * 1e9
                    {
                        if Double(entry.speedIntervalBytes) < lowestSpeed.bytesPerSecond * lowestSpeed.seconds {
                            stalled.append(
                                (
                                    id,
                                    .tooSlow(
                                        entry.originalURL, bytesPerSecond: lowestSpeed.bytesPerSecond,
                                        seconds: lowestSpeed.seconds)
                                ))
                        } else {
                            entry.speedIntervalStart = now
                            entry.speedIntervalBytes = 0
                            state.entries[id] = entry
                        }
                    }
                } else if let closedAt = entry.request.closedAt, now > closedAt && now - closedAt > grace {
                    abandoned.append(entry)
                    state.entries[id] = nil
                }
            }
            return (stalled, abandoned)
        }
        for (id, error) in stalled {
            close(taskIdentifier: id, with: .failed(error))
        }
        for entry in abandoned {
            entry.continuation?.resume(returning: entry.request.pendingEnd ?? .cancelled)
        }
    }
}
