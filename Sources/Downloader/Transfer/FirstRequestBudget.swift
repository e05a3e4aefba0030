/// When a run's first request on a new connection is cut short: a value whose one event is a body chunk's arrival,
/// tested without sockets.
///
/// On Linux, FoundationNetworking watches a new connection for writability for the whole of its first request (the
/// connect step asks for it and nothing takes it back), and a socket is always writable: that request spins a core
/// until it ends (the documentation's platform notes). A request that reuses the connection does not. So the first
/// request asks for a whole window — a small or mid-size file is one request, one round trip, as with curl — and this
/// budget ends it early when, `measuring` after its first body byte, the rest of it would still take longer than
/// `remaining` at the rate seen: the rest continues on a new connection whose first request is short
/// (`Transfer.Configuration.firstWindowSize`), and a slow transfer spins for a fraction of a second, not for all of
/// it. A request that ends within about a second spins while it lasts.
package struct FirstRequestBudget: Sendable, Equatable {
    /// How long the body is watched before its rate is judged, in nanoseconds. Default a quarter of a second.
    var measuring: UInt64 = 250_000_000
    /// The longest the rest of the request may take at the rate seen for it to go on, in nanoseconds. Default 1 s.
    var remaining: UInt64 = 1_000_000_000
    /// When the first body bytes arrived, and how many had arrived by then.
    private var firstTime: UInt64?
    private var firstReceived: Int64 = 0
    /// Whether the request was judged (it then goes on to its end, or was cut).
    private(set) var isDecided = false

    /// When the request is judged even if no more bytes come (a body that pauses): `measuring` after its first body
    /// bytes; `nil` before they came or once judged.
    var judgementTime: UInt64? {
        guard !isDecided, let firstTime else { return nil }
        return firstTime + measuring
    }

    /// The defaults.
    init() {}

    /// A budget with other limits (tests).
    /// - Parameters:
    ///   - measuring: nanoseconds of body before the rate is judged.
    ///   - remaining: the longest the rest may take, in nanoseconds.
    init(measuring: UInt64, remaining: UInt64) {
        self.measuring = measuring
        self.remaining = remaining
    }

    /// Body bytes arrived.
    /// - Parameters:
    ///   - received: body bytes of this request so far, this chunk's included.
    ///   - left: body bytes still to come.
    ///   - now: a monotonic time in nanoseconds.
    /// - Returns: whether to end the request here.
    mutating func bodyArrived(received: Int64, left: Int64, now: UInt64) -> Bool {
        guard !isDecided else { return false }
        guard left > 0 else {
            isDecided = true
            return false
        }
        guard let firstTime else {
            (firstTime, firstReceived) = (now, received)
            return false
        }
        guard now > firstTime, now - firstTime >= measuring else { return false }
        isDecided = true
        let rate = Double(received - firstReceived) / Double(now - firstTime)  // bytes per nanosecond
        guard rate > 0 else { return true }
        return Double(left) / rate > Double(remaining)
    }
}
