extension SessionBridge {
    /// One request's phase, changed only by its `mutating` events, each of which says what the bridge must do.
    ///
    /// It holds the rule that once crashed the process: corelibs traps ("Received callback for HTTP redirection, but
    /// we're not waiting for it") when a task is cancelled after a redirect's completion handler was called and before
    /// the task's next event. A close in that window keeps its cancel until the redirect has settled.
    struct RequestState: Sendable {
        enum Phase: Sendable {
            /// Running; events go to the sink.
            case open
            /// Running; a redirect's completion handler was called and the task has produced no event since.
            case redirecting
            /// Closed with `end` at `closedAt` (uptime nanoseconds); its cancel waits for the redirect to settle
            /// when `cancelDeferred`; body bytes that still arrive go to the sink when `keepsData`.
            case closed(RequestEnd, closedAt: UInt64, cancelDeferred: Bool, keepsData: Bool)
        }

        private(set) var phase = Phase.open

        /// Whether the request still delivers events to its sink.
        var isOpen: Bool {
            if case .closed = phase { return false }
            return true
        }

        /// Whether body bytes still go to the sink: open, or closed with an end that keeps what still arrives
        /// (`TransferSink.keepsData(after:)`: bytes that reached the process are written, never fetched twice).
        var deliversData: Bool {
            if case .closed(_, _, _, let keepsData) = phase { return keepsData }
            return true
        }

        /// How the request ended, once closed: the caller gets it when the task completes.
        var pendingEnd: RequestEnd? {
            if case .closed(let end, _, _, _) = phase { return end }
            return nil
        }

        /// When the request was closed, once closed.
        var closedAt: UInt64? {
            if case .closed(_, let closedAt, _, _) = phase { return closedAt }
            return nil
        }

        /// Closes the request (the caller, a sink's verdict, the watchdog). Closing twice keeps the first end.
        /// - Parameters:
        ///   - end: how the request ended.
        ///   - now: the time, for the watchdog's grace period.
        ///   - keepingData: whether body bytes that still arrive go to the sink.
        /// - Returns: whether to cancel the task now (`false`: closed already, or the cancel waits for the redirect).
        mutating func close(with end: RequestEnd, now: UInt64, keepingData: Bool = false) -> Bool {
            switch phase {
            case .open:
                phase = .closed(end, closedAt: now, cancelDeferred: false, keepsData: keepingData)
                return true
            case .redirecting:
                phase = .closed(end, closedAt: now, cancelDeferred: true, keepsData: keepingData)
                return false
            case .closed:
                return false
            }
        }

        /// A redirect is about to be answered through its completion handler.
        /// - Returns: whether to answer it; `false` when closed (the cancel on its way ends the task; answering now
        ///   could reach the task after the cancel).
        mutating func redirectWillBeAnswered() -> Bool {
            guard isOpen else { return false }
            phase = .redirecting
            return true
        }

        /// The task produced an event (a response or its completion): a redirect before it has settled.
        /// - Returns: whether a deferred cancel is due now.
        mutating func taskProducedEvent() -> Bool {
            switch phase {
            case .redirecting:
                phase = .open
                return false
            case .closed(let end, let closedAt, cancelDeferred: true, let keepsData):
                phase = .closed(end, closedAt: closedAt, cancelDeferred: false, keepsData: keepsData)
                return true
            case .open, .closed:
                return false
            }
        }
    }
}
