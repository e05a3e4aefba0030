import Foundation

/// Runs one generation of a download: the transfer, and after each transient fault (a lost connection, a stall, 408,
/// 429, 5xx) a backoff and another transfer that resumes by Range, up to the retry limit. It reports how the
/// generation ended; the manager's state machine decides what that means.
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
    ///   - willPlace: told where the verified file goes just before it moves.
    ///   - progress: bytes on disk and the total, after every chunk.
    ///   - willRetry: told before each backoff.
    ///   - warn: told when bytes on disk could not be trusted and were not used.
    /// - Returns: how the generation ended, and the file it produced when it completed.
    func run(
        url: URL, options: DownloadOptions, replacing: URL?,
        willPlace: @escaping @Sendable (URL, Int64, Checksum?, String?) -> Void,
        progress: @escaping @Sendable (Int64, Int64?) -> Void,
        willRetry: @escaping @Sendable (Retry) async -> Void,
        warn: @escaping @Sendable (String) -> Void = { _ in }
    ) async -> (DownloadManager.StateMachine<URL>.TransferEnd, TransferResult?) {
        var retries = 0
        let limiters = [options.maximumBytesPerSecond.map(BandwidthLimiter.init), sharedLimiter].compactMap { $0 }
        while true {
            let transfer = Transfer(
                url: url, options: options, directory: directory, bridge: bridge, configuration: engine,
                replacing: replacing, willPlace: willPlace, limiters: limiters, warn: warn, progress: progress)
            do throws(DownloadError) {
                let result = try await transfer.run()
                return (.completed(result.checksum), result)
            } catch {
                if error == .cancelled || Task.isCancelled { return (.cancelled, nil) }
                guard error.isTransient, retries < retryLimit else { return (.failed(error), nil) }
                retries += 1
                let delay = backoff.delay(attempt: retries - 1, retryAfter: error.retryAfter)
                await willRetry(Retry(attempt: retries, delay: delay, error: error))
                do {
                    try await Task.sleep(for: .seconds(delay))
                } catch {
                    return (.cancelled, nil)
                }
            }
        }
    }
}
