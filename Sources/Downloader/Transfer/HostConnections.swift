/// How many requests each host has in flight over all downloads, and how many it may have: the manager's cap
/// (`DownloadManager.Configuration.maximumConnectionsPerHost`), lowered for a while when the host answers "too many".
///
/// A value changed only by its `mutating` events, each of which returns the waiting requests that may go now; the
/// bridge keeps their continuations (`ConnectionGate`). Every rule is tested without a socket.
///
/// - A request goes when its host has fewer in flight than its limit and no earlier-ranked request waits for it.
///   Waiting requests go in rank order (a download's start time, so the oldest download's next window goes first
///   and downloads under a cap finish one after another instead of all together at the end), then arrival order.
/// - A `503` or `429` for a request while others to its host are in flight means "too many" (nginx `limit_conn`, a
///   CDN's per-client limit): the host's limit drops to the others, and the refused request waits for its turn
///   again without spending its download's retries. A refusal with nothing else in flight is the server's answer to
///   this request alone and is not "too many": the download's retry rules take it.
/// - A lowered limit rises by one every `recoveryInterval` without a new refusal, up to the number that was refused,
///   and is then forgotten.
struct HostConnections: Sendable {
    /// One waiting request.
    typealias Ticket = Int

    /// What a request must do.
    enum Admission: Equatable, Sendable {
        /// It holds one of its host's connections now; `finished` gives it back.
        case go
        /// It waits until an event returns its ticket.
        case wait
    }

    /// One host's count, limit and queue.
    struct Host: Sendable {
        var inFlight = 0
        /// A limit below the cap after a refusal: how many may go, the number that was refused (where recovery
        /// stops), and when it last changed (uptime nanoseconds).
        var lowered: (limit: Int, ceiling: Int, since: UInt64)?
        /// Waiting requests: ticket and rank, in the order they go.
        var waiting: [(ticket: Ticket, rank: UInt64)] = []
        var isIdle: Bool { inFlight == 0 && waiting.isEmpty && lowered == nil }
    }

    /// The most requests in flight to one host; `nil`: no cap of the manager's (only refusals lower it).
    let cap: Int?
    /// How long a lowered limit stays before rising by one (nanoseconds).
    let recoveryInterval: UInt64
    private(set) var hosts: [String: Host] = [:]
    private var waitingHosts: [Ticket: String] = [:]

    /// Creates the counts with no request in flight.
    /// - Parameters:
    ///   - cap: the most requests in flight per host, at least 1; `nil` for no cap.
    ///   - recoveryInterval: how long a lowered limit stays before rising by one (nanoseconds).
    init(cap: Int?, recoveryInterval: UInt64 = 10_000_000_000) {
        self.cap = cap.map { max(1, $0) }
        self.recoveryInterval = recoveryInterval
    }

    /// How many requests `host` may have in flight now; `nil` when nothing limits it.
    func limit(of host: String) -> Int? {
        let lowered = hosts[host]?.lowered?.limit
        switch (cap, lowered) {
        case (let cap?, let lowered?): return min(cap, lowered)
        case (let cap?, nil): return cap
        case (nil, let lowered): return lowered
        }
    }

    /// A request to `host` asks to go.
    /// - Parameters:
    ///   - ticket: its ticket, unique among waiting ones.
    ///   - host: its origin (`URL.origin`).
    ///   - rank: lower goes first among waiting requests (a download's start time).
    /// - Returns: `.go` (it is counted in flight) or `.wait`.
    mutating func request(_ ticket: Ticket, host: String, rank: UInt64) -> Admission {
        // No recovery here: a limit rises in `finished` and `tick`, which let the waiting go first.
        var entry = hosts[host, default: Host()]
        defer { hosts[host] = entry }
        if entry.waiting.isEmpty, entry.inFlight < (limit(of: host) ?? .max) {
            entry.inFlight += 1
            return .go
        }
        let index = entry.waiting.firstIndex { $0.rank > rank } ?? entry.waiting.endIndex
        entry.waiting.insert((ticket, rank), at: index)
        waitingHosts[ticket] = host
        return .wait
    }

    /// A request to `host` that went has ended (or was refused): its connection is free.
    /// - Returns: the tickets that go now (each counted in flight).
    mutating func finished(host: String, now: UInt64) -> [Ticket] {
        guard var entry = hosts[host], entry.inFlight > 0 else { return [] }
        entry.inFlight -= 1
        hosts[host] = entry
        recover(host, now: now)
        return admit(host)
    }

    /// A waiting request gives up (its task was cancelled).
    /// - Returns: whether it was waiting; `false` when it went already (the caller then owes a `finished`) or is
    ///   unknown.
    mutating func withdraw(_ ticket: Ticket) -> Bool {
        guard let host = waitingHosts.removeValue(forKey: ticket), var entry = hosts[host] else { return false }
        entry.waiting.removeAll { $0.ticket == ticket }
        hosts[host] = entry.isIdle ? nil : entry
        return true
    }

    /// A request to `host` in flight was answered `503` or `429`.
    /// - Returns: whether that is "too many" (others were in flight): the limit is lowered to the others. The
    ///   caller then calls `finished` for it and asks again.
    mutating func refused(host: String, now: UInt64) -> Bool {
        guard var entry = hosts[host], entry.inFlight > 1 else { return false }
        let others = entry.inFlight - 1
        entry.lowered = (limit: min(others, entry.lowered?.limit ?? .max), ceiling: entry.inFlight, since: now)
        hosts[host] = entry
        return true
    }

    /// Time passed: lowered limits whose interval is over rise.
    /// - Returns: the tickets that go now.
    mutating func tick(now: UInt64) -> [Ticket] {
        var admitted: [Ticket] = []
        for host in hosts.keys where hosts[host]?.lowered != nil {
            recover(host, now: now)
            admitted += admit(host)
        }
        return admitted
    }

    /// Raises `host`'s lowered limit by one per interval passed, forgetting it at its ceiling.
    private mutating func recover(_ host: String, now: UInt64) {
        guard var entry = hosts[host], var lowered = entry.lowered else { return }
        while now >= lowered.since + recoveryInterval, entry.lowered != nil {
            lowered.limit += 1
            lowered.since += recoveryInterval
            entry.lowered = lowered.limit >= lowered.ceiling ? nil : lowered
        }
        hosts[host] = entry.isIdle ? nil : entry
    }

    /// Lets waiting requests of `host` go while its limit allows.
    private mutating func admit(_ host: String) -> [Ticket] {
        guard var entry = hosts[host] else { return [] }
        var admitted: [Ticket] = []
        let limit = limit(of: host) ?? .max
        while !entry.waiting.isEmpty, entry.inFlight < limit {
            let next = entry.waiting.removeFirst()
            waitingHosts[next.ticket] = nil
            entry.inFlight += 1
            admitted.append(next.ticket)
        }
        hosts[host] = entry.isIdle ? nil : entry
        return admitted
    }
}
