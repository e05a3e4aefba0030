import Dispatch
import Foundation

/// Events as async sequences: every download's, or one URL's.
extension DownloadManager {
    /// One `events()` or `events(for:)` stream.
    struct EventSubscriber {
        let continuation: AsyncStream<DownloadEvent>.Continuation
        /// The URL it follows (`nil`: every download).
        let url: URL?
        /// The kinds it takes (`nil`: all).
        var kinds: Set<DownloadEvent.Kind>? = nil

        /// Whether it takes an event of this kind.
        func takes(_ kind: DownloadEvent.Kind) -> Bool {
            kinds?.contains(kind) ?? true
        }
    }

    /// Every state change, throttled progress and retry of every download, from the moment of the call: subscribe
    /// before you start downloads, or their first events are missed (or use `events(for:)` for one download).
    ///
    /// The stream does not end when downloads finish — a manager lives on and may get more work. It finishes when
    /// `shutdown()` has stopped everything (the last events are delivered first), or for one consumer when its task is
    /// cancelled or it breaks out of its loop. A consumer that falls more than 10,000 events behind loses the oldest.
    /// - Returns: a stream for one consumer; call again for another.
    public func events() -> AsyncStream<DownloadEvent> {
        subscribe(to: nil)
    }

    /// Every download's events of some kinds only, as `events()` has them: the others are never queued for this
    /// stream, nor is its consumer woken for them. A consumer that shows only warnings (`dl -q`) no longer pays for the
    /// state changes and progress of every file (issue #52).
    /// - Parameter kinds: the kinds wanted, e.g. `[.warning, .receiptsSaveFailed]`.
    /// - Returns: a stream for one consumer; call again for another.
    public func events(of kinds: Set<DownloadEvent.Kind>) -> AsyncStream<DownloadEvent> {
        subscribe(to: nil, kinds: kinds)
    }

    /// One download's events — state changes, progress, retries, warnings — from the moment of the call.
    ///
    /// The stream ends after the download completes, fails (after its retries) or is removed or forgotten, or when the
    /// manager shuts down. A suspended download's stream stays open: it may be resumed. Called for a URL that is
    /// already completed or failed, it yields that state (`.stateChanged`) and ends; for a URL not requested yet, it
    /// waits for the download to start. A consumer that falls more than 10,000 events behind loses the oldest.
    /// - Parameter url: the download's URL (its identity, as given to `download` or `enqueue`).
    /// - Returns: a stream for one consumer; call again for another.
    public func events(for url: URL) -> AsyncStream<DownloadEvent> {
        subscribe(to: url.withoutCredentials)
    }

    private func subscribe(to url: URL?, kinds: Set<DownloadEvent.Kind>? = nil) -> AsyncStream<DownloadEvent> {
        let id = UUID()
        let (stream, continuation) = AsyncStream.makeStream(
            of: DownloadEvent.self, bufferingPolicy: .bufferingNewest(10_000))
        if machine.isShuttingDown {
            continuation.finish()
            return stream
        }
        if let url, let receipt = book[DownloadKey(url)]?.receipt,
            receipt.state == .completed || receipt.state == .failed
        {
            continuation.yield(.stateChanged(receipt))
            continuation.finish()
            return stream
        }
        eventSubscribers[id] = EventSubscriber(continuation: continuation, url: url, kinds: kinds)
        continuation.onTermination = { _ in Task { await self.unsubscribe(id) } }
        return stream
    }

    private func unsubscribe(_ id: UUID) {
        eventSubscribers[id] = nil
    }

    /// Tells every subscriber that follows the event's download, or every download; a download's own streams end
    /// with its completion, failure or removal.
    /// - Parameters:
    ///   - event: what happened.
    ///   - record: what the log gets instead of the event's own record (one with more detail).
    func emit(_ event: DownloadEvent, logging record: DownloadLogRecord? = nil) {
        if let log = configuration.log, let record = record ?? DownloadLogRecord(event) { log(record) }
        guard hears(event.kind) else { return }
        let url = event.url
        let ends: Bool
        switch event {
        case .stateChanged(let receipt): ends = receipt.state == .completed || receipt.state == .failed
        case .removed: ends = true
        case .progress, .retrying, .warning: ends = false
        case .receiptsSaveFailed, .receiptsSaved: return broadcast(event)
        }
        let kind = event.kind
        for (id, subscriber) in eventSubscribers where subscriber.url == nil || subscriber.url == url {
            if subscriber.takes(kind) { subscriber.continuation.yield(event) }
            if ends && subscriber.url != nil {
                eventSubscribers[id] = nil
                subscriber.continuation.finish()
            }
        }
    }

    /// Whether a subscriber may want an event of `kind`: one takes the kind, or follows one download (it is told of
    /// that download's end). `false` skips the event's URL and the subscribers' loop (issue #52: `dl -q` takes
    /// warnings only, and a batch none).
    func hears(_ kind: DownloadEvent.Kind) -> Bool {
        eventSubscribers.values.contains { $0.url != nil || $0.takes(kind) }
    }

    /// Logs a decision that is no event (`Configuration.log`, level `info`): a transfer's note.
    func logNote(_ message: String, about key: DownloadKey) {
        guard let log = configuration.log else { return }
        var metadata = DownloadLogRecord.metadata(about: key.url)
        if let receipt = book[key]?.receipt { metadata["bytes"] = String(receipt.totalBytesWritten) }
        log(DownloadLogRecord(level: .info, message: message, metadata: metadata))
    }

    /// Tells the subscribers of every download (an event about the manager, not one download).
    private func broadcast(_ event: DownloadEvent) {
        let kind = event.kind
        for subscriber in eventSubscribers.values where subscriber.url == nil && subscriber.takes(kind) {
            subscriber.continuation.yield(event)
        }
    }

    /// The download rested: its `enqueue` progress callbacks get no more calls (see `CallbackChannel`).
    func endProgress(_ key: DownloadKey) {
        for channel in progressHandlers.removeValue(forKey: key) ?? [] { channel.progressEnded() }
    }
}

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
