import Dispatch
import Foundation

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
    init(cap: Int?, recoveryInterval: TimeInterval = 10) {
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
        let now = DispatchTime.now().uptimeNanoseconds
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
        let now = DispatchTime.now().uptimeNanoseconds
        resume(
            state.withLock { state in
                let tickets = state.connections.tick(now: now)
                return state.take(tickets)
            })
    }

    /// How long a request refused alone just after an answer waits, keeping its turn, before it asks again
    /// (`Refusal.settling`).
    static let settlingPause: TimeInterval = 0.25

    /// A request to `host` in flight, task `taskIdentifier`, was answered `503` or `429`.
    /// - Parameter retryAfter: the delay the server asked for, if any.
    /// - Returns: whether it is "too many" (others were in flight, or one was answered a moment ago): then the bridge
    ///   ends the task without telling its sink, and `takeRefusal` gives its `perform` the pause.
    func refuse(_ host: String, taskIdentifier: Int, retryAfter: TimeInterval?) -> Bool {
        let now = DispatchTime.now().uptimeNanoseconds
        return state.withLock { state in
            state.refused.insert(taskIdentifier)
            switch state.connections.refused(host: host, now: now, namesTime: (retryAfter ?? 0) > 0) {
            case .own: return false
            case .tooMany: state.refusals[taskIdentifier] = Pause(delay: retryAfter ?? 0, holdsTurn: false)
            case .settling:
                state.refusals[taskIdentifier] = Pause(delay: max(retryAfter ?? 0, Self.settlingPause), holdsTurn: true)
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
