import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension HTTPTestServer {
    /// The longest an accepted request waits for a refusal (`holdUntilBusy`), in seconds.
    static let longestBusyHold = 10.0

    /// A server that serves only so many requests at once, like nginx's `limit_conn`: with the query option
    /// `busyAbove=N`, a request that finds more than N being answered (itself included) gets `503` at once, and with
    /// `holdUntilBusy=1` an accepted one waits until some request was refused (at most `longestBusyHold`), so that a
    /// test sees the overlap without depending on timing.
    /// - Returns: the `503` for a refused request; `nil` for an accepted one, after its hold.
    func busyAnswer(to head: RequestHead) -> Response? {
        guard let limit = head.query["busyAbove"].flatMap({ Int($0) }) else { return nil }
        var refused = false
        update { state in
            let lingering = state.lingeringAnswers.count
            // Each answer is counted by its next `busyLag` checks only.
            state.lingeringAnswers = state.lingeringAnswers.compactMap { $0 > 1 ? $0 - 1 : nil }
            guard state.statistics.activeRequests + lingering > limit else { return }
            state.statistics.refusedRequests += 1
            refused = true
        }
        if refused { return .text(503, "too many connections\n") }
        if head.query["holdUntilBusy"] == "1" {
            let deadline = Date().addingTimeInterval(Self.longestBusyHold)
            while state.withLock({ $0.statistics.refusedRequests == 0 }), Date() < deadline, !isStopping {
                usleep(2_000)
            }
        }
        return nil
    }

    /// A request was answered: it stops counting as being answered — with `busyLag=N`, only after the next N
    /// `busyAbove` checks have counted it too, as nginx frees a `limit_conn` slot when it finalises the request, which a
    /// client's next request can beat, and a busy server finalises later (a lag that no load stretches or shortens).
    /// The server calls it just before the answer's last bytes leave (the client cannot ask again before), and only
    /// then: a thread that runs late after its write, or a paced answer's pause after its last chunk, adds no count.
    func endAnswer(_ head: RequestHead) {
        let lag = head.query["busyLag"].flatMap { Int($0) } ?? 0
        update { state in
            state.statistics.activeRequests -= 1
            if lag > 0 { state.lingeringAnswers.append(lag) }
        }
    }
}
