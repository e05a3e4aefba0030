import Dispatch
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension SessionBridge {
    /// Closes requests that received nothing for `stallTimeout` (or less than the lowest speed over its interval),
    /// releases callers of closed requests whose completion never came (5 s after the close), and lets time raise
    /// hosts' lowered connection limits.
    func checkForStalls() {
        gate.tick()
        let limit = UInt64(configuration.stallTimeout * 1e9)
        let grace: UInt64 = 5_000_000_000
        let now = DispatchTime.now().uptimeNanoseconds
        let lowestSpeed = configuration.lowestSpeed
        let (stalled, abandoned) = state.withLock { state -> ([(Int, DownloadError)], [Entry]) in
            var stalled: [(Int, DownloadError)] = []
            var abandoned: [Entry] = []
            for (id, var entry) in state.entries {
                if entry.request.isOpen {
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
