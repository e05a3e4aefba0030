/// How many requests each host has in flight over all downloads, and how many it may have: the manager's cap
/// (`DownloadManager.Configuration.maximumConnectionsPerHost`), lowered for a while when the host answers "too many".
///
/// A value changed only by its `mutating` events, each of which returns the waiting requests that may go now; the
/// bridge keeps their continuations (`ConnectionGate`). Every rule is tested without a socket.
///
/// - A request goes when its host has fewer in flight than its limit and no earlier-ranked request waits for it.
///   Waiting requests go in rank order (a download's start time, so the oldest download's next window goes first
///   and downloads under a cap finish one after another instead of all together at the end), then arrival order.
/// - A `503` or `429` that names a time (`Retry-After` above 0) is the server's answer to this request — when to ask
///   again — whatever else is in flight: it lowers nothing (a rate limit said so to every file's first request, and
///   taking each as "too many" ran 16 files one at a time).
/// - A `503` or `429` for a request while others to its host are in flight means "too many" (nginx `limit_conn`, a
///   CDN's per-client limit): the host's limit drops to the others, and the refused request waits for its turn
///   again without spending its download's retries. So do the first two refused alone within `settleInterval` of an
///   answer there: the server may still count the answered request (nginx frees the slot when it finalises the
///   request, which the next request can beat), and the refused request asks again after a pause
///   (`Refusal.settling`). Any other refusal with nothing else in flight is the server's answer to this request
///   alone: the download's retry rules take it.
/// - A lowered limit rises by one every `recoveryInterval` without a new refusal, up to the number that was refused,
///   and is then forgotten.
struct HostConnections: Sendable {
    /// One waiting request.
    typealias Ticket = Int

    /// How a request that went has ended.
    enum Ending: Equatable, Sendable {
        /// It had a response being served (whole, or ended early to fetch the rest otherwise): the server may count it
        /// for a moment more.
        case answered
        /// It was refused (`refused` was called for it).
        case refused
        /// Anything else: failed or cancelled.
        case other
    }

    /// What a `503` or `429` means.
    enum Refusal: Equatable, Sendable {
        /// The server's answer to this request alone: the download's retry rules take it.
        case own
        /// Others were in flight: the host's limit is lowered, and the request waits for its turn.
        case tooMany
        /// Nothing else in flight, but a request there was answered a moment ago and may still be counted: the host
        /// gets one request at a time, and this one asks again after a pause, holding its turn meanwhile, without
        /// spending a retry.
        case settling
    }

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
        /// Refused requests whose `finished` has not come yet.
        var refusedInFlight = 0
        var isIdle: Bool { inFlight == 0 && waiting.isEmpty && lowered == nil }
    }

    /// The most requests in flight to one host; `nil`: no cap of the manager's (only refusals lower it).
    let cap: Int?
    /// How long a lowered limit stays before rising by one (nanoseconds).
    let recoveryInterval: UInt64
    /// How long after an answer a lone refusal is still taken as "too many" (nanoseconds).
    let settleInterval: UInt64
    /// How many lone refusals one answer excuses.
    static let settlingPerAnswer = 2
    private(set) var hosts: [String: Host] = [:]
    /// When a request to each host was last answered (uptime nanoseconds) and how many lone refusals were excused
    /// since; hosts whose answer is older than `settleInterval` are dropped once there are many.
    private var lastAnswer: [String: (ended: UInt64, excused: Int)] = [:]
    private var waitingHosts: [Ticket: String] = [:]

    /// Creates the counts with no request in flight.
    /// - Parameters:
    ///   - cap: the most requests in flight per host, at least 1; `nil` for no cap.
    ///   - recoveryInterval: how long a lowered limit stays before rising by one (nanoseconds).
    ///   - settleInterval: how long after an answer a lone refusal may still mean "too many" (nanoseconds).
    init(cap: Int?, recoveryInterval: UInt64 = 10_000_000_000, settleInterval: UInt64 = 5_000_000_000) {
        self.cap = cap.map { max(1, $0) }
        self.recoveryInterval = recoveryInterval
        self.settleInterval = settleInterval
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

    /// A request to `host` that went has ended: its connection is free.
    /// - Parameter ending: how it ended; an answer opens `settleInterval` for lone refusals.
    /// - Returns: the tickets that go now (each counted in flight).
    mutating func finished(host: String, now: UInt64, ending: Ending = .answered) -> [Ticket] {
        guard var entry = hosts[host], entry.inFlight > 0 else { return [] }
        entry.inFlight -= 1
        switch ending {
        case .refused: entry.refusedInFlight = max(0, entry.refusedInFlight - 1)
        case .answered:
            lastAnswer[host] = (now, 0)
            if lastAnswer.count > 256 { lastAnswer = lastAnswer.filter { now < $0.value.ended + settleInterval } }
        case .other: break
        }
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
    /// - Parameter namesTime: the refusal carries a `Retry-After` above 0: it is `.own`.
    /// - Returns: what it means. For `.tooMany` the limit is lowered to the others; for `.tooMany` and `.settling` the
    ///   caller then calls `finished` for it and asks again (after a pause for `.settling`).
    mutating func refused(host: String, now: UInt64, namesTime: Bool = false) -> Refusal {
        guard var entry = hosts[host], entry.inFlight > entry.refusedInFlight else { return .own }
        entry.refusedInFlight += 1
        defer { hosts[host] = entry }
        if namesTime { return .own }
        // The requests still being answered there (another refused one is no longer).
        let others = entry.inFlight - entry.refusedInFlight
        guard others > 0 else {
            guard let answer = lastAnswer[host], now < answer.ended + settleInterval,
                answer.excused < Self.settlingPerAnswer
            else { return .own }
            lastAnswer[host]?.excused += 1
            // One at a time until the host settles: what else would go now would meet the same count.
            entry.lowered = (limit: 1, ceiling: max(2, entry.lowered?.ceiling ?? 2), since: now)
            return .settling
        }
        let ceiling = others + 1
        entry.lowered = (limit: min(others, entry.lowered?.limit ?? .max), ceiling: ceiling, since: now)
        return .tooMany
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
