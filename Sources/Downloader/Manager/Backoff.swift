import Foundation

/// Exponential backoff with jitter, honouring `Retry-After`.
struct Backoff: Sendable {
    var baseDelay: TimeInterval
    var maximumDelay: TimeInterval

    /// The delay before retry number `attempt` (0 for the first retry).
    /// - Parameters:
    ///   - attempt: how many retries were made before this one.
    ///   - retryAfter: the server's `Retry-After`, which wins when present (capped at one hour).
    ///   - random: a number in 0..<1, for jitter.
    func delay(attempt: Int, retryAfter: TimeInterval?, random: Double = Double.random(in: 0..<1)) -> TimeInterval {
        if let retryAfter { return min(max(0, retryAfter), 3600) }
        let exponential = min(maximumDelay, baseDelay * pow(2, Double(min(attempt, 30))))
        return exponential * (0.5 + 0.5 * random)  // "equal jitter": between half and all of the step
    }
}
