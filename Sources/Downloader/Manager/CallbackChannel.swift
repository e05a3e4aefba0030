import Foundation

/// Delivers the `progress:` and `completion:` callbacks of one `enqueue` call off the manager's actor, in order, on
/// a task of their own: a slow callback delays only its own later calls, never the manager or another download.
///
/// The actor only records what is due (the newest progress, the completion) under a lock and wakes the channel's
/// task, so it never waits for a callback. Progress that a slow callback could not take in time is coalesced: it
/// gets the newest receipt next. The completion comes after every progress call, once, and ends the channel.
final class CallbackChannel: Sendable {
    private struct Due: Sendable {
        /// Whether a completion callback waits: the channel then ends only with the completion.
        let expectsCompletion: Bool
        var progress: DownloadReceipt?
        var completion: Result<DownloadReceipt, DownloadError>?
        var closed = false
    }

    private let due: Locked<Due>
    private let wake: AsyncStream<Void>.Continuation

    /// Starts the channel's task.
    /// - Parameters:
    ///   - progress: called with the receipt as bytes arrive, newest first when the callback falls behind.
    ///   - completion: called once, last.
    init(
        progress: (@Sendable (DownloadReceipt) -> Void)?,
        completion: (@Sendable (Result<DownloadReceipt, DownloadError>) -> Void)?
    ) {
        due = Locked(Due(expectsCompletion: completion != nil))
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        wake = continuation
        Task.detached { [due] in
            for await _ in stream {
                let now = due.withLock { due -> Due in
                    defer { (due.progress, due.completion) = (nil, nil) }
                    return due
                }
                if let receipt = now.progress { progress?(receipt) }
                if let result = now.completion {
                    completion?(result)
                    return
                }
                if now.closed { return }
            }
        }
    }

    /// Progress to report (replacing progress not yet delivered).
    func progress(_ receipt: DownloadReceipt) {
        let open = due.withLock { due -> Bool in
            guard !due.closed else { return false }
            due.progress = receipt
            return true
        }
        if open { wake.yield() }
    }

    /// The download's outcome: delivered after any due progress, then the channel ends.
    func complete(_ result: Result<DownloadReceipt, DownloadError>) {
        let open = due.withLock { due -> Bool in
            guard !due.closed else { return false }
            due.completion = result
            due.closed = true
            return true
        }
        if open {
            wake.yield()
            wake.finish()
        }
    }

    /// No more progress will come (the download rested): due progress is still delivered; a completion may follow.
    func progressEnded() {
        let ends = due.withLock { due -> Bool in
            // A channel with a completion to wait for stays open for it.
            guard !due.closed, !due.expectsCompletion else { return false }
            due.closed = true
            return true
        }
        if ends {
            wake.yield()
            wake.finish()
        }
    }
}
