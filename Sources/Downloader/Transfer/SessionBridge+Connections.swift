import Dispatch
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Connections per host over all downloads: a request waits for its host's turn (`ConnectionGate`), and a `503` or
/// `429` while others to that host are in flight, or just after an answer there, is "too many", asked again later
/// without its sink knowing.
extension SessionBridge {
    /// The longest `Retry-After` a "too many" refusal is waited for before asking again (seconds); the turn at the
    /// gate usually comes later anyway.
    static let longestTooManyDelay: TimeInterval = 60

    /// Performs one request, delivering its events to `sink`.
    /// - Parameters:
    ///   - unprepared: the request (headers complete); it goes out with the `User-Agent` and through
    ///     `Configuration.prepareRequest`.
    ///   - sink: receives the response and body on the delegate queue.
    ///   - rank: among requests waiting for a connection to the same host, lower goes first (a download's start
    ///     time, so that downloads under a cap finish in order); the default is now (first come, first served).
    /// - Returns: how it ended. Cancelling the calling task closes the request (or ends its wait) and returns
    ///   `.cancelled`.
    func perform(
        _ unprepared: URLRequest, sink: any TransferSink, rank: UInt64 = DispatchTime.now().uptimeNanoseconds
    ) async -> RequestEnd {
        let host = unprepared.url?.origin ?? ""
        while true {
            guard await gate.enter(host, rank: rank) else { return .cancelled }
            let (end, id) = await performAuthorized(unprepared, sink: sink)
            let pause = id.flatMap { gate.takeRefusal($0) }
            let nanoseconds = UInt64(min(pause?.delay ?? 0, Self.longestTooManyDelay) * 1e9)
            var cancelled = false
            if let pause, pause.holdsTurn, nanoseconds > 0 {
                do { try await Task.sleep(nanoseconds: nanoseconds) } catch { cancelled = true }
            }
            gate.leave(host, taskIdentifier: id, answered: Self.wasAnswered(end))
            guard let pause, !cancelled else { return cancelled ? .cancelled : end }
            if !pause.holdsTurn, nanoseconds > 0 {
                do { try await Task.sleep(nanoseconds: nanoseconds) } catch { return .cancelled }
            }
        }
    }

    /// Whether a request that ended so had a response being served, which the server may count a moment more (also
    /// one cut short or ended to fetch the rest otherwise); failures and cancellations are not taken as answers.
    static func wasAnswered(_ end: RequestEnd) -> Bool {
        switch end {
        case .failed, .cancelled: return false
        case .finished, .restartFromZero, .unsatisfiable, .diskBehind, .cutShort, .wholeWithoutRanges, .unreliableETag:
            return true
        }
    }

    /// Whether `response` refuses its request as "too many" (see `HostConnections.refused`); it is then asked again.
    /// The host is the request's before any redirect; one that `prepareRequest` sent elsewhere is not recognised
    /// (its refusal is an ordinary retry).
    func refusesAsTooMany(_ response: URLResponse, taskIdentifier id: Int) -> Bool {
        guard let http = response as? HTTPURLResponse, http.statusCode == 503 || http.statusCode == 429,
            let url = state.withLock({ $0.entries[id]?.originalURL })
        else { return false }
        let retryAfter = http.value(forHTTPHeaderField: "Retry-After").flatMap { RetryAfter.delay(from: $0) }
        return gate.refuse(url.origin, taskIdentifier: id, retryAfter: retryAfter)
    }
}

/// Which origins probably have an idle keep-alive connection in libcurl's cache, so that a new download's first
/// request can ask for a whole window at once (issue #24).
///
/// A request on a *new* connection makes FoundationNetworking spin a core until it ends (documentation, "Platform notes"),
/// which is why a fresh download asks for 16 KiB first. A request that reuses a connection does not spin, so when a
/// request to the same origin finished a moment ago, the next download needs no short first request: a small file
/// is then one request, one round trip. A value: every rule is tested without a socket.
struct WarmConnections {
    /// How long an idle connection is assumed to stay in libcurl's cache (it keeps one for up to 118 s by default).
    static let lifetime: UInt64 = 60_000_000_000

    private var idle: [String: (count: Int, lastUse: UInt64)] = [:]
    /// The most idle connections per origin that are counted (the session's connections per host).
    let capacity: Int

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// A request to `origin` ended; when `reusable` (it ended normally, so libcurl kept its connection), one more
    /// connection is idle.
    mutating func requestEnded(origin: String, reusable: Bool, now: UInt64) {
        guard reusable else { return }
        var entry = current(origin, now: now)
        entry.count = min(capacity, entry.count + 1)
        entry.lastUse = now
        idle[origin] = entry
    }

    /// Takes an idle connection to `origin` for a new request, if one is probably there.
    /// - Returns: whether the request will probably reuse a connection.
    mutating func take(origin: String, now: UInt64) -> Bool {
        var entry = current(origin, now: now)
        guard entry.count > 0 else {
            idle[origin] = nil
            return false
        }
        entry.count -= 1
        idle[origin] = entry
        return true
    }

    /// Whether an idle connection to `origin` is probably there.
    func hasIdle(origin: String, now: UInt64) -> Bool {
        current(origin, now: now).count > 0
    }

    /// The origin's entry, forgotten once it is older than `lifetime`.
    private func current(_ origin: String, now: UInt64) -> (count: Int, lastUse: UInt64) {
        guard let entry = idle[origin], now &- entry.lastUse < Self.lifetime else { return (0, now) }
        return entry
    }
}

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
