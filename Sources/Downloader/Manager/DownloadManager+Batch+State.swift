import Foundation

extension DownloadManager {
    /// The bookkeeping of one batch: free slots (one spent per request read, one given back per outcome taken by the
    /// consumer), the requests in flight, and when the outcome stream ends (the intake ended and every request taken
    /// is delivered).
    final class Batch: Sendable {
        private struct State {
            var available: Int
            /// The driver, waiting for a slot.
            var taker: CheckedContinuation<Bool, Never>?
            var isClosed = false
            var intakeEnded = false
            var inFlight: [Machine.WaiterID: URL] = [:]
        }

        private let state: Locked<State>
        private let outcomes: AsyncStream<DownloadOutcome>.Continuation

        init(limit: Int, outcomes: AsyncStream<DownloadOutcome>.Continuation) {
            state = Locked(State(available: limit))
            self.outcomes = outcomes
        }

        /// Spends a slot, waiting for one if none is free.
        /// - Returns: `false` once the batch is closed (its consumer left).
        func take() async -> Bool {
            // A free slot is taken without suspending (most of the time, while a long list is read).
            if let answer = state.withLock({ Self.takeIfFree(&$0) }) { return answer }
            return await withCheckedContinuation { continuation in
                let answer: Bool? = state.withLock { state in
                    let answer = Self.takeIfFree(&state)
                    if answer == nil { state.taker = continuation }  // one taker: the batch's driver
                    return answer
                }
                if let answer { continuation.resume(returning: answer) }
            }
        }

        /// Takes a free slot: `true`; `false` when the batch is closed; `nil` when none is free.
        private static func takeIfFree(_ state: inout State) -> Bool? {
            if state.isClosed { return false }
            guard state.available > 0 else { return nil }
            state.available -= 1
            return true
        }

        /// Gives a slot back (the consumer took an outcome).
        func give() {
            let taker = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                guard let taker = state.taker else {
                    state.available += 1
                    return nil
                }
                state.taker = nil
                return taker
            }
            taker?.resume(returning: true)
        }

        /// How many requests were handed to the manager and not yet delivered.
        var inFlightCount: Int { state.withLock { $0.inFlight.count } }

        /// A request was handed to the manager with waiter `id`.
        func started(_ id: Machine.WaiterID, url: URL) {
            state.withLock { $0.inFlight[id] = url }
        }

        /// Delivers the outcome of waiter `id`, ending the stream after the last one.
        func deliver(
            _ id: Machine.WaiterID, _ request: DownloadRequest, _ result: Result<DownloadReceipt, DownloadError>
        ) {
            let outcome = DownloadOutcome(request: request, result: result)
            // Yielded under the lock, with the removal: `endIntake` cannot see the batch empty and finish the stream
            // between the two (the outcome would be dropped). `finish` runs outside it: it calls `onTermination`.
            let isLast = state.withLock { state -> Bool in
                state.inFlight[id] = nil
                outcomes.yield(outcome)
                return state.intakeEnded && state.inFlight.isEmpty
            }
            if isLast { outcomes.finish() }
        }

        /// No request will be read any more: the stream ends once those in flight are delivered.
        func endIntake() {
            let isLast = state.withLock { state -> Bool in
                state.intakeEnded = true
                return state.inFlight.isEmpty
            }
            if isLast { outcomes.finish() }
        }

        /// The consumer left: no more requests are read.
        /// - Returns: the waiters still in flight, to be given up.
        func close() -> [(id: Machine.WaiterID, url: URL)] {
            let (taker, abandoned) = state.withLock { state in
                state.isClosed = true
                defer {
                    state.taker = nil
                    state.inFlight = [:]
                }
                return (state.taker, state.inFlight.map { (id: $0.key, url: $0.value) })
            }
            taker?.resume(returning: false)
            return abandoned
        }
    }
}
