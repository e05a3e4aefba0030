import Foundation

extension Transfer.StateMachine {
    /// When a window's request ends before its last byte: the one rule the request's sink applies to every body chunk,
    /// as a value, tested without sockets (`TransferWindowEndTests`).
    ///
    /// A request ends early in three cases, and in each it only stops *asking*: the bytes that already reached the
    /// process are kept and written (`WindowSink.keepsData(after:)`), and the machine asks for the rest from where they
    /// end.
    /// - **The disk is behind a whole body.** URLSession on Linux cannot slow a response, so while a response streams a
    ///   whole file, bytes that wait to be written are memory — the disk stages', and what URLSession read and has not
    ///   delivered yet while the request is the session's only one (`DeliveryBacklog`). Up to `softUnwritten` they
    ///   wait. Beyond it, a server that can resume (Range with a validator) is asked for the rest in windows
    ///   (`diskBehind`: each window waits for the disk). One that cannot gets `behindGrace` for the disk to come back
    ///   under `softUnwritten` — a writeback burst or a journal commit — as long as no more than `hardUnwritten` wait;
    ///   past either, the download fails clearly (`cannotWait`) rather than hold the file in memory.
    /// - **A grown window while the disk slows down** (`grownLimit`, see `WindowSizing`): the rest comes in windows of
    ///   the base size (`diskBehind`).
    /// - **A slow first request on a new connection** (`FirstRequestBudget`): `cutShort`, the rest on a new connection.
    struct WindowEndRule: Sendable {
        /// What a chunk's arrival decides.
        enum Verdict: Equatable, Sendable {
            /// Go on.
            case proceed
            /// End here; the rest in windows the disk keeps up with.
            case diskBehind
            /// End here; the rest on a new connection.
            case cutShort
            /// The disk stayed behind a body that cannot be resumed for longer than the rule allows: fail.
            case cannotWait
        }

        /// Unwritten bytes a whole body may leave waiting without a second thought.
        var softUnwritten: Int64
        /// Unwritten bytes a body that cannot be resumed may never exceed.
        var hardUnwritten: Int64
        /// How long, in nanoseconds, a body that cannot be resumed may stay beyond `softUnwritten`.
        var behindGrace: UInt64
        /// For a window grown past the base size, the unwritten bytes at which it ends (`nil`: not grown).
        var grownLimit: Int64?
        /// For a run's first request on a new connection, when to cut it (`nil` once judged, or for any other).
        var firstRequestBudget: FirstRequestBudget?
        /// Since when (nanoseconds) a body that cannot be resumed is beyond `softUnwritten`.
        private(set) var behindSince: UInt64?

        init(
            softUnwritten: Int64, hardUnwritten: Int64? = nil, behindGrace: UInt64 = 1_000_000_000,
            grownLimit: Int64? = nil, firstRequestBudget: FirstRequestBudget? = nil
        ) {
            self.softUnwritten = softUnwritten
            self.hardUnwritten = hardUnwritten ?? softUnwritten + softUnwritten / 2
            self.behindGrace = behindGrace
            self.grownLimit = grownLimit
            self.firstRequestBudget = firstRequestBudget
        }

        /// What one request's response is, for the rule.
        struct Response: Equatable, Sendable {
            /// It streams the whole file (a 200).
            var isWholeStream: Bool
            /// A later request could continue it (Range with a validator to send as `If-Range`, and a known length).
            var resumable: Bool
            /// The body's length, when announced.
            var expectedBodyLength: Int64?
        }

        /// A body chunk arrived (and was sent to the disk).
        /// - Parameters:
        ///   - received: body bytes of this request so far, this chunk's included.
        ///   - unwritten: bytes that wait to be written now.
        ///   - response: what the response is.
        ///   - now: reads a monotonic clock (nanoseconds); called only while a decision needs the time.
        /// - Returns: whether the request goes on.
        mutating func chunkArrived(
            received: Int64, unwritten: Int64, response: Response, now: () -> UInt64
        ) -> Verdict {
            if response.isWholeStream {
                if unwritten <= softUnwritten {
                    behindSince = nil
                } else if response.resumable {
                    return .diskBehind
                } else {
                    let time = now()
                    let since = behindSince ?? time
                    behindSince = since
                    if unwritten > hardUnwritten || time - since > behindGrace { return .cannotWait }
                }
            }
            if let grownLimit, !response.isWholeStream, unwritten > grownLimit { return .diskBehind }
            guard firstRequestBudget != nil else { return .proceed }
            return spentFirstRequestBudget(received: received, response: response, now: now()) ? .cutShort : .proceed
        }

        /// Once the request ended early, the most unwritten bytes up to which the bytes that still arrive are kept
        /// (they reached the process already; beyond this they are dropped and asked for again): twice the limit that
        /// ended a grown window, else the hard limit of a whole body.
        var lateDataLimit: Int64 { grownLimit.map { 2 * $0 } ?? hardUnwritten }

        /// The time the first request's budget must be judged at although no bytes come (a monotonic time in
        /// nanoseconds).
        var judgementTime: UInt64? { firstRequestBudget?.judgementTime }

        /// That time came.
        mutating func judge(received: Int64, response: Response, now: UInt64) -> Verdict {
            spentFirstRequestBudget(received: received, response: response, now: now) ? .cutShort : .proceed
        }

        /// Whether this request, a run's first on a new connection, would spin a core for long and ends here
        /// (`FirstRequestBudget`). Only a ranged response of known length is cut: its rest can be asked for.
        private mutating func spentFirstRequestBudget(received: Int64, response: Response, now: UInt64) -> Bool {
            guard var budget = firstRequestBudget else { return false }
            guard let expected = response.expectedBodyLength, !response.isWholeStream else {
                firstRequestBudget = nil
                return false
            }
            let cut = budget.bodyArrived(received: received, left: expected - received, now: now)
            firstRequestBudget = budget.isDecided ? nil : budget
            return cut
        }
    }

}
