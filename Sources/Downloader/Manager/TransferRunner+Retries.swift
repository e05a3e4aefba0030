import Foundation

extension TransferRunner {
    /// The retry rule of one generation, as a value: each attempt's end is an event, and what follows — the
    /// generation's end, or another attempt after a backoff — is the action. Tested without sockets
    /// (`TransferRetriesTests`).
    ///
    /// A cancellation ends the generation; a fault that is not transient fails it at once; a transient one (a lost
    /// connection, a stall, 408, 429, 5xx) is retried after `Backoff`'s delay, the server's `Retry-After` winning, until
    /// `limit` retries were made.
    struct Retries: Sendable {
        /// How one attempt ended.
        enum AttemptEnd: Sendable {
            case completed(Checksum?)
            case failed(DownloadError)
        }

        /// What follows.
        enum Action: Sendable {
            /// The generation ends so.
            case end(DownloadManager.StateMachine<URL>.TransferEnd)
            /// Wait `retry.delay` seconds, then run another attempt (which resumes by Range).
            case retry(Retry)
        }

        /// The most retries.
        let limit: Int
        let backoff: Backoff
        /// Retries made so far.
        private(set) var made = 0

        /// - Parameter made: retries already spent by the download's generation before (see `TransferEnd.retryLater`).
        init(limit: Int, backoff: Backoff, made: Int = 0) {
            self.limit = limit
            self.backoff = backoff
            self.made = made
        }

        /// An attempt ended.
        /// - Parameters:
        ///   - end: how.
        ///   - cancelled: the generation's task was cancelled (a suspend, a removal, a shutdown).
        ///   - random: a number in 0..<1, for the backoff's jitter.
        /// - Returns: what follows.
        mutating func attemptEnded(
            _ end: AttemptEnd, cancelled: Bool, random: Double = Double.random(in: 0..<1)
        ) -> Action {
            switch end {
            case .completed(let checksum):
                return .end(.completed(checksum))
            case .failed(let error):
                if error == .cancelled || cancelled { return .end(.cancelled) }
                guard error.isTransient, made < limit else { return .end(.failed(error)) }
                let delay = backoff.delay(attempt: made, retryAfter: error.retryAfter, random: random)
                made += 1
                return .retry(Retry(attempt: made, delay: delay, error: error))
            }
        }

        /// The backoff's wait was cancelled.
        func waitCancelled() -> DownloadManager.StateMachine<URL>.TransferEnd { .cancelled }
    }
}
