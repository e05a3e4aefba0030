import Foundation

/// Runs one generation of a download: the transfer, and after each transient fault a backoff and another transfer
/// that resumes by Range, as its retry rule (`Retries`, a value) decides. It reports how the generation ended; the
/// manager's state machine decides what that means.
struct TransferRunner: Sendable {
    /// A retry about to happen: which one (1 for the first), after how long, and why.
    struct Retry: Sendable {
        let attempt: Int
        let delay: TimeInterval
        let error: DownloadError
    }

    let directory: DownloadDirectory
    let bridge: SessionBridge
    let backoff: Backoff
    let retryLimit: Int
    let engine: Transfer.Configuration
    /// The manager's bandwidth limit, shared by every transfer (without a limit until one is set).
    var sharedLimiter: BandwidthLimiter

    /// Runs the attempts until one completes, a fault is not transient, the retries are used up, or the task is
    /// cancelled.
    /// - Parameters:
    ///   - url: the download.
    ///   - options: its options; `checksum` is what the file is verified against.
    ///   - replacing: a completed file the verified file replaces, if any.
    ///   - retriesMade: retries of the limit spent by the generation before (which ended to wait a `Retry-After`).
    ///   - report: told by every attempt what happens (`TransferObserver`), and by the runner each retry before its
    ///     backoff.
    /// - Returns: how the generation ended, and the file it produced when it completed. A retry the server asked to
    ///   wait for (`Retry-After`) ends the generation (`.retryLater`): the download waits out of its slot.
    func run(
        url: URL, options: DownloadOptions, replacing: URL?, retriesMade: Int = 0, report: TransferReport
    ) async -> (DownloadManager.StateMachine<URL>.TransferEnd, TransferResult?) {
        var retries = Retries(limit: retryLimit, backoff: backoff, made: retriesMade)
        let limiters = [options.maximumBytesPerSecond.map(BandwidthLimiter.init), sharedLimiter].compactMap { $0 }
        // One rank for every attempt: a retry keeps the download's place at its host's gate.
        let rank = DispatchTime.now().uptimeNanoseconds
        while true {
            let transfer = Transfer(
                url: url, options: options, directory: directory, bridge: bridge, configuration: engine,
                replacing: replacing, limiters: limiters, rank: rank, observer: report)
            let attempt: Retries.AttemptEnd
            var result: TransferResult?
            do throws(DownloadError) {
                result = try await transfer.run()
                attempt = .completed(result?.checksum)
            } catch {
                attempt = .failed(error)
            }
            switch retries.attemptEnded(attempt, cancelled: Task.isCancelled) {
            case .end(let end):
                if case .completed = end { return (end, result) }
                return (end, nil)
            case .retry(let retry):
                report.retrying(retry)
                // The server said when: another download may use the slot meanwhile (the manager's machine).
                if retry.error.retryAfter != nil && retry.delay > 0 {
                    return (.retryLater(after: retry.delay, retriesMade: retries.made), nil)
                }
                do {
                    try await Task.sleep(for: .seconds(retry.delay))
                } catch {
                    return (retries.waitCancelled(), nil)
                }
            }
        }
    }
}

extension TransferRunner {
    /// Runs the generation (`run`) and tells `report` how it ended: its last message.
    func runReporting(
        url: URL, options: DownloadOptions, replacing: URL?, retriesMade: Int, report: TransferReport
    ) async {
        let (end, result) = await run(
            url: url, options: options, replacing: replacing, retriesMade: retriesMade, report: report)
        report.ended(end, result: result)
    }
}

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
