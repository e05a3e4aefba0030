import Dispatch
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

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
///   again without spending its download's retries. So do the first four refused alone after an answer there, each
///   sent within `settleInterval` of the answer or of the refusal excused before it (however late it is judged): the
///   server may still count the answered request (nginx frees the slot when it finalises the request, which the next
///   request can beat, and a busy server finalises later), and the refused request asks again after a pause that
///   doubles each time (`Refusal.settling`). Any other refusal with nothing else in flight is the server's answer to
///   this request alone: the download's retry rules take it.
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
        /// spending a retry. `attempt` counts the lone refusals since that answer (1 for the first): each pause is
        /// twice the one before.
        case settling(attempt: Int)
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
    /// How many lone refusals one answer excuses: with pauses of 0.25 s doubling (`ConnectionGate.settlingPause`),
    /// the fourth asks again 3.75 s after the first. (Two were excused until a loaded CI run finalised an answer after
    /// two checks of the next request.)
    static let settlingPerAnswer = 4
    private(set) var hosts: [String: Host] = [:]
    /// When a request to each host was last answered, or a lone refusal after it last excused (uptime nanoseconds),
    /// and how many lone refusals were excused since the answer; hosts whose time is older than `settleInterval` are
    /// dropped once there are many. (Timed from the last excuse, not the answer: a loaded machine stretched four
    /// pauses and their requests past 5 s after the answer, and the fourth refusal was taken as the request's own.)
    private var lastAnswer: [String: (at: UInt64, excused: Int)] = [:]
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
        limit(lowered: hosts[host]?.lowered?.limit)
    }

    /// The limit with the cap and a host's lowered limit, if any.
    private func limit(lowered: Int?) -> Int? {
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
        if requestAtOnce(host: host) { return .go }
        var entry = hosts[host, default: Host()]
        let index = entry.waiting.firstIndex { $0.rank > rank } ?? entry.waiting.endIndex
        entry.waiting.insert((ticket, rank), at: index)
        hosts[host] = entry
        waitingHosts[ticket] = host
        return .wait
    }

    /// A request to `host` that goes only if it can at once (room, and nobody waiting there): `request`'s first step,
    /// which needs no ticket.
    /// - Parameter host: its origin (`URL.origin`).
    /// - Returns: whether it goes (it is counted in flight); `false` changes nothing (the caller asks `request` next).
    mutating func requestAtOnce(host: String) -> Bool {
        guard let index = hosts.index(forKey: host) else {
            hosts[host] = Host(inFlight: 1)  // a host with nothing in flight or waiting has room (a limit is 1 or more)
            return true
        }
        let entry = hosts.values[index]
        guard entry.waiting.isEmpty, entry.inFlight < (limit(lowered: entry.lowered?.limit) ?? .max) else {
            return false
        }
        hosts.values[index].inFlight += 1
        return true
    }

    /// A request to `host` that went has ended: its connection is free.
    /// - Parameter ending: how it ended; an answer opens `settleInterval` for lone refusals.
    /// - Returns: the tickets that go now (each counted in flight).
    mutating func finished(host: String, now: UInt64, ending: Ending = .answered) -> [Ticket] {
        // The host is looked up once for the whole event: each look-up hashes its name, and this ran eight a request
        // (issue #52).
        guard let index = hosts.index(forKey: host), hosts.values[index].inFlight > 0 else { return [] }
        hosts.values[index].inFlight -= 1
        switch ending {
        case .refused: hosts.values[index].refusedInFlight = max(0, hosts.values[index].refusedInFlight - 1)
        case .answered:
            lastAnswer[host] = (now, 0)
            if lastAnswer.count > 256 { lastAnswer = lastAnswer.filter { now < $0.value.at + settleInterval } }
        case .other: break
        }
        return settle(at: index, now: now)
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
    /// - Parameters:
    ///   - now: when the refusal is judged (uptime nanoseconds).
    ///   - sentAt: when the request went (uptime nanoseconds; `nil`: `now`). A lone refusal is excused when the request
    ///     went within `settleInterval` of the answer or the excuse before it, however late its refusal is judged: the
    ///     server counted the answer because the request came soon after it (a loaded client judged a refusal more
    ///     than 5 s after the excuse before it although it had asked again 1 s after that excuse, and spent a retry).
    ///   - namesTime: the refusal carries a `Retry-After` above 0: it is `.own`.
    /// - Returns: what it means. For `.tooMany` the limit is lowered to the others; for `.tooMany` and `.settling` the
    ///   caller then calls `finished` for it and asks again (after a pause for `.settling`).
    mutating func refused(host: String, now: UInt64, sentAt: UInt64? = nil, namesTime: Bool = false) -> Refusal {
        guard var entry = hosts[host], entry.inFlight > entry.refusedInFlight else { return .own }
        entry.refusedInFlight += 1
        defer { hosts[host] = entry }
        if namesTime { return .own }
        // The requests still being answered there (another refused one is no longer).
        let others = entry.inFlight - entry.refusedInFlight
        guard others > 0 else {
            guard let answer = lastAnswer[host], min(sentAt ?? now, now) < answer.at + settleInterval,
                answer.excused < Self.settlingPerAnswer
            else { return .own }
            lastAnswer[host] = (at: now, excused: answer.excused + 1)
            // One at a time until the host settles: what else would go now would meet the same count.
            entry.lowered = (limit: 1, ceiling: max(2, entry.lowered?.ceiling ?? 2), since: now)
            return .settling(attempt: answer.excused + 1)
        }
        let ceiling = others + 1
        entry.lowered = (limit: min(others, entry.lowered?.limit ?? .max), ceiling: ceiling, since: now)
        return .tooMany
    }

    /// Time passed: lowered limits whose interval is over rise.
    /// - Returns: the tickets that go now.
    mutating func tick(now: UInt64) -> [Ticket] {
        var admitted: [Ticket] = []
        for host in hosts.keys {
            guard let index = hosts.index(forKey: host), hosts.values[index].lowered != nil else { continue }
            admitted += settle(at: index, now: now)
        }
        return admitted
    }

    /// After a change at the host at `index`: its lowered limit rises by one per interval passed (forgotten at its
    /// ceiling), its waiting requests go while its limit allows, and it is forgotten once idle.
    /// - Returns: the tickets that go now (each counted in flight).
    private mutating func settle(at index: [String: Host].Index, now: UInt64) -> [Ticket] {
        if var lowered = hosts.values[index].lowered {
            while now >= lowered.since + recoveryInterval, hosts.values[index].lowered != nil {
                lowered.limit += 1
                lowered.since += recoveryInterval
                hosts.values[index].lowered = lowered.limit >= lowered.ceiling ? nil : lowered
            }
        }
        var admitted: [Ticket] = []
        let limit = limit(lowered: hosts.values[index].lowered?.limit) ?? .max
        while !hosts.values[index].waiting.isEmpty, hosts.values[index].inFlight < limit {
            admitted.append(hosts.values[index].waiting.removeFirst().ticket)
            hosts.values[index].inFlight += 1
        }
        for ticket in admitted { waitingHosts[ticket] = nil }
        if hosts.values[index].isIdle { hosts.remove(at: index) }
        return admitted
    }
}

/// The bridge's side of `HostConnections`: requests wait here, without a thread, for a connection to their host, and
/// a refused request's "too many" is remembered until its `perform` picks it up.
final class ConnectionGate: Sendable {
    private struct State {
        var connections: HostConnections
        var waiting: [HostConnections.Ticket: CheckedContinuation<Bool, Never>] = [:]
        /// Tickets handed out whose request was not made yet, and whether their task was cancelled meanwhile.
        var pending: [HostConnections.Ticket: Bool] = [:]
        var nextTicket = 0
        /// Requests (task identifiers) refused as "too many", with how they wait before asking again.
        var refusals: [Int: Pause] = [:]
        /// Requests (task identifiers) answered `503` or `429`, whatever it meant, until they leave.
        var refused: Set<Int> = []

        /// The continuations of `tickets`, removed.
        mutating func take(_ tickets: [HostConnections.Ticket]) -> [CheckedContinuation<Bool, Never>] {
            tickets.compactMap { waiting.removeValue(forKey: $0) }
        }
    }

    private let state: Locked<State>
    /// The gate's clock (uptime nanoseconds): `DispatchTime`'s, or a test's.
    let now: @Sendable () -> UInt64

    /// How a request refused as "too many" waits before it asks again.
    struct Pause: Equatable {
        /// Seconds (the server's `Retry-After`, or `settlingPause`).
        var delay: TimeInterval
        /// Whether it keeps its turn at the gate meanwhile (`Refusal.settling`: nothing else may go to the host).
        var holdsTurn: Bool
    }

    /// Creates a gate.
    /// - Parameters:
    ///   - cap: the most requests in flight per host; `nil` for no cap.
    ///   - recoveryInterval: seconds before a lowered limit rises by one.
    ///   - clock: the time now, in uptime nanoseconds (tests move it by hand); `nil`: `DispatchTime`'s.
    init(cap: Int?, recoveryInterval: TimeInterval = 10, clock: (@Sendable () -> UInt64)? = nil) {
        now = clock ?? { DispatchTime.now().uptimeNanoseconds }
        state = Locked(
            State(connections: HostConnections(cap: cap, recoveryInterval: UInt64(max(0, recoveryInterval) * 1e9))))
    }

    /// Waits until a request to `host` may go.
    /// - Parameters:
    ///   - host: the request's origin.
    ///   - rank: lower goes first among waiting requests.
    /// - Returns: `true` when it holds a connection (give it back with `leave`); `false` when the calling task was
    ///   cancelled while waiting.
    func enter(_ host: String, rank: UInt64) async -> Bool {
        // The common case, a free connection and nobody waiting, goes at once: no continuation and no cancellation
        // handler (10,000 instructions a request; issue #52). A cancelled task is refused below, as before.
        if !Task.isCancelled, state.withLock({ $0.connections.requestAtOnce(host: host) }) { return true }
        let ticket = state.withLock { state -> HostConnections.Ticket in
            defer { state.nextTicket += 1 }
            state.pending[state.nextTicket] = false
            return state.nextTicket
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let goes = state.withLock { state -> Bool? in
                    if state.pending.removeValue(forKey: ticket) == true { return false }
                    switch state.connections.request(ticket, host: host, rank: rank) {
                    case .go: return true
                    case .wait:
                        state.waiting[ticket] = continuation
                        return nil
                    }
                }
                if let goes { continuation.resume(returning: goes) }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                guard let continuation = state.waiting.removeValue(forKey: ticket) else {
                    // Not asked yet: the request sees the mark. (Not pending and not waiting: it went already.)
                    if state.pending[ticket] != nil { state.pending[ticket] = true }
                    return nil
                }
                _ = state.connections.withdraw(ticket)
                return continuation
            }
            continuation?.resume(returning: false)
        }
    }

    /// Gives back the connection of a request to `host` that went.
    /// - Parameters:
    ///   - taskIdentifier: its task, if it was made.
    ///   - answered: whether it had a response being served (`SessionBridge.wasAnswered`).
    func leave(_ host: String, taskIdentifier: Int?, answered: Bool) {
        let now = now()
        resume(
            state.withLock { state in
                let wasRefused = taskIdentifier.map { state.refused.remove($0) != nil } ?? false
                let ending: HostConnections.Ending = wasRefused ? .refused : answered ? .answered : .other
                let tickets = state.connections.finished(host: host, now: now, ending: ending)
                return state.take(tickets)
            })
    }

    /// Lets time raise lowered limits (the bridge's watchdog calls it).
    func tick() {
        let now = now()
        resume(
            state.withLock { state in
                let tickets = state.connections.tick(now: now)
                return state.take(tickets)
            })
    }

    /// How long a request refused alone just after an answer first waits, keeping its turn, before it asks again
    /// (`Refusal.settling`); each further lone refusal after the same answer waits twice as long.
    static let settlingPause: TimeInterval = 0.25

    /// A request to `host` in flight, task `taskIdentifier`, was answered `503` or `429`.
    /// - Parameters:
    ///   - retryAfter: the delay the server asked for, if any.
    ///   - sentAt: when the request went (uptime nanoseconds; `nil`: now), see `HostConnections.refused`.
    /// - Returns: whether it is "too many" (others were in flight, or one was answered a moment ago): then the bridge
    ///   ends the task without telling its sink, and `takeRefusal` gives its `perform` the pause.
    func refuse(_ host: String, taskIdentifier: Int, retryAfter: TimeInterval?, sentAt: UInt64? = nil) -> Bool {
        let now = now()
        return state.withLock { state in
            state.refused.insert(taskIdentifier)
            switch state.connections.refused(host: host, now: now, sentAt: sentAt, namesTime: (retryAfter ?? 0) > 0) {
            case .own: return false
            case .tooMany: state.refusals[taskIdentifier] = Pause(delay: retryAfter ?? 0, holdsTurn: false)
            case .settling(let attempt):
                let pause = Self.settlingPause * Double(1 << min(max(0, attempt - 1), 8))
                state.refusals[taskIdentifier] = Pause(delay: max(retryAfter ?? 0, pause), holdsTurn: true)
            }
            return true
        }
    }

    /// Whether task `taskIdentifier` was refused as "too many", and how it waits before asking again.
    func takeRefusal(_ taskIdentifier: Int) -> Pause? {
        state.withLock { $0.refusals.removeValue(forKey: taskIdentifier) }
    }

    private func resume(_ continuations: [CheckedContinuation<Bool, Never>]) {
        for continuation in continuations { continuation.resume(returning: true) }
    }
}

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
    ///   - origin: `unprepared.url`'s origin (`URL.origin`) when the caller knows it; `nil`: worked out here.
    /// - Returns: how it ended. Cancelling the calling task closes the request (or ends its wait) and returns
    ///   `.cancelled`.
    func perform(
        _ unprepared: URLRequest, sink: any TransferSink, rank: UInt64 = DispatchTime.now().uptimeNanoseconds,
        origin: String? = nil
    ) async -> RequestEnd {
        let host = origin ?? unprepared.url?.origin ?? ""
        while true {
            guard await gate.enter(host, rank: rank) else { return .cancelled }
            let (end, id) = await performAuthorized(unprepared, sink: sink, origin: host)
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
            let (origin, sentAt) = state.withLock({ state in state.entries[id].map { ($0.origin, $0.started) } })
        else { return false }
        let retryAfter = http.value(forHTTPHeaderField: "Retry-After").flatMap { RetryAfter.delay(from: $0) }
        return gate.refuse(origin, taskIdentifier: id, retryAfter: retryAfter, sentAt: sentAt)
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
