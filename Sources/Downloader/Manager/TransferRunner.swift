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
    /// The manager's bandwidth limit, shared by every transfer.
    var sharedLimiter: BandwidthLimiter?

    /// Runs the attempts until one completes, a fault is not transient, the retries are used up, or the task is
    /// cancelled.
    /// - Parameters:
    ///   - url: the download.
    ///   - options: its options; `checksum` is what the file is verified against.
    ///   - replacing: a completed file the verified file replaces, if any.
    ///   - retriesMade: retries of the limit spent by the generation before (which ended to wait a `Retry-After`).
    ///   - willPlace: told where the verified file goes just before it moves.
    ///   - progress: bytes on disk and the total, after every chunk.
    ///   - willRetry: told before each backoff.
    ///   - warn: told when bytes on disk could not be trusted and were not used.
    ///   - note: told what the transfer decided that is not a warning (for `Configuration.log`).
    /// - Returns: how the generation ended, and the file it produced when it completed. A retry the server asked to
    ///   wait for (`Retry-After`) ends the generation (`.retryLater`): the download waits out of its slot.
    func run(
        url: URL, options: DownloadOptions, replacing: URL?, retriesMade: Int = 0,
        willPlace: @escaping @Sendable (URL, Int64, Checksum?, String?) -> Void,
        progress: @escaping @Sendable (Int64, Int64?) -> Void,
        willRetry: @escaping @Sendable (Retry) async -> Void,
        warn: @escaping @Sendable (String) -> Void = { _ in },
        note: @escaping @Sendable (String) -> Void = { _ in }
    ) async -> (DownloadManager.StateMachine<URL>.TransferEnd, TransferResult?) {
        var retries = Retries(limit: retryLimit, backoff: backoff, made: retriesMade)
        let limiters = [options.maximumBytesPerSecond.map(BandwidthLimiter.init), sharedLimiter].compactMap { $0 }
        // One rank for every attempt: a retry keeps the download's place at its host's gate.
        let rank = DispatchTime.now().uptimeNanoseconds
        while true {
            let transfer = Transfer(
                url: url, options: options, directory: directory, bridge: bridge, configuration: engine,
                replacing: replacing, willPlace: willPlace, limiters: limiters, rank: rank, warn: warn, note: note,
                progress: progress)
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
                await willRetry(retry)
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
