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
