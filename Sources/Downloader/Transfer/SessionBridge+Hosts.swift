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
