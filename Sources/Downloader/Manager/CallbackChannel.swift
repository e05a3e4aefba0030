import Dispatch
import Foundation

/// Delivers the `progress:` and `completion:` callbacks of one `enqueue` call off the manager's actor, in order, on a
/// serial dispatch queue of their own: a slow callback delays only its own later calls, never the manager or another
/// download.
///
/// A dispatch queue, not a task: a callback may block (user code often does), and a blocked task would hold one of
/// the few threads of Swift's cooperative pool, on which the manager and every transfer run — two blocked callbacks
/// on a two-core machine would stall everything. Dispatch adds threads when its threads block.
///
/// The actor only records what is due (the newest progress, the completion) under a lock and schedules the queue when
/// nothing is scheduled yet, so it never waits for a callback. Progress that a slow callback could not take in time is
/// coalesced: it gets the newest receipt next. The completion comes after every progress call, once.
final class CallbackChannel: Sendable {
    private struct Due: Sendable {
        /// Whether a completion callback waits: the channel then takes progress until the completion.
        let expectsCompletion: Bool
        var progress: DownloadReceipt?
        var completion: Result<DownloadReceipt, DownloadError>?
        /// Whether the queue has a delivery scheduled that will see what is due.
        var scheduled = false
        /// Whether nothing more is taken (the completion came, or progress ended without a completion to wait for).
        var closed = false
    }

    private let due: Locked<Due>
    private let queue = DispatchQueue(label: "Downloader.CallbackChannel")
    private let onProgress: (@Sendable (DownloadReceipt) -> Void)?
    private let onCompletion: (@Sendable (Result<DownloadReceipt, DownloadError>) -> Void)?

    /// Creates a channel.
    /// - Parameters:
    ///   - progress: called with the receipt as bytes arrive, the newest when the callback falls behind.
    ///   - completion: called once, last.
    init(
        progress: (@Sendable (DownloadReceipt) -> Void)?,
        completion: (@Sendable (Result<DownloadReceipt, DownloadError>) -> Void)?
    ) {
        due = Locked(Due(expectsCompletion: completion != nil))
        onProgress = progress
        onCompletion = completion
    }

    /// Progress to report (replacing progress not yet delivered).
    func progress(_ receipt: DownloadReceipt) {
        let schedule = due.withLock { due -> Bool in
            guard !due.closed else { return false }
            due.progress = receipt
            defer { due.scheduled = true }
            return !due.scheduled
        }
        if schedule { queue.async { self.deliver() } }
    }

    /// The download's outcome: delivered after any due progress; nothing is taken afterwards.
    func complete(_ result: Result<DownloadReceipt, DownloadError>) {
        let schedule = due.withLock { due -> Bool in
            guard !due.closed else { return false }
            due.completion = result
            due.closed = true
            defer { due.scheduled = true }
            return !due.scheduled
        }
        if schedule { queue.async { self.deliver() } }
    }

    /// No more progress will come (the download rested): due progress is still delivered; a completion may follow.
    func progressEnded() {
        due.withLock { due in
            if !due.expectsCompletion { due.closed = true }
        }
    }

    /// Calls the callbacks with what is due, until nothing is.
    private func deliver() {
        while true {
            let now = due.withLock { due -> (DownloadReceipt?, Result<DownloadReceipt, DownloadError>?)? in
                guard due.progress != nil || due.completion != nil else {
                    due.scheduled = false
                    return nil
                }
                defer { (due.progress, due.completion) = (nil, nil) }
                return (due.progress, due.completion)
            }
            guard let (progress, completion) = now else { return }
            if let progress { onProgress?(progress) }
            if let completion { onCompletion?(completion) }
        }
    }
}
