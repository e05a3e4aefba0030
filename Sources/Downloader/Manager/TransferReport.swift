import Foundation

/// The manager's end of one generation's `TransferObserver`: the one ordered way from a transfer, its retries and its
/// end up to the actor (issue #51).
///
/// - Counts (bytes on disk, the total, requests in flight) are kept under a lock where they change and read by the
///   manager's ticker: progress reaches the actor at most every tick, never once per chunk.
/// - The placement of a verified file is written to the journal before the file moves (synchronously: a crash during
///   the move is then recognised at the next start).
/// - Everything else — warnings, notes, retries and finally the generation's end — is a `Message` in one queue, which
///   the generation's task hands to the actor in the order told (`next()`); the end is always last.
final class TransferReport: TransferObserver, Sendable {
    /// What the actor is told, in order.
    enum Message: Sendable {
        /// A warning or a note of the transfer.
        case said(TransferNews)
        /// A retry about to happen (before its backoff).
        case retrying(TransferRunner.Retry)
        /// How the generation ended, and the file it produced when it completed. The last message.
        case ended(DownloadManager.StateMachine<URL>.TransferEnd, TransferResult?)
    }

    /// What the ticker reads.
    struct Counts: Sendable, Equatable {
        var written: Int64 = 0
        var total: Int64?
        /// Requests in flight (a HEAD, windows, segments).
        var requests = 0
    }

    /// Where a placement is recorded: the journal, and the download's line as the manager would write it.
    struct PlacementRecord: Sendable {
        let journal: ReceiptJournal?
        let url: URL
        let options: DownloadOptions
        let expectations: KeptExpectations
    }

    private struct Queue {
        var messages: [Message] = []
        var waiter: CheckedContinuation<Message?, Never>?
        var ended = false
    }

    private let counts: Locked<Counts>
    private let queue = Locked(Queue())
    private let placement: PlacementRecord

    /// - Parameters:
    ///   - written: bytes on disk when the generation starts.
    ///   - total: the file's length, if known.
    ///   - placement: where the placement of the verified file is recorded.
    init(written: Int64, total: Int64?, placement: PlacementRecord) {
        counts = Locked(Counts(written: written, total: total))
        self.placement = placement
    }

    /// The counts now.
    var current: Counts { counts.withLock { $0 } }

    // MARK: - TransferObserver

    func transferProgressed(written: Int64, total: Int64?) {
        counts.withLock {
            $0.written = written
            $0.total = total
        }
    }

    func transferRequestsChanged(by delta: Int) {
        counts.withLock { $0.requests = max(0, $0.requests + delta) }
    }

    func transferWillPlace(_ file: TransferPlacement) {
        let entry = JournalEntry(
            placing: placement.url, options: placement.options, expectations: placement.expectations,
            name: file.file.lastPathComponent, length: file.length, checksum: file.checksum,
            suggested: file.suggestedFilename)
        placement.journal?.appendNow([.put(entry)])
    }

    func transferSays(_ news: TransferNews) {
        send(.said(news))
    }

    // MARK: - The generation's runner

    /// A retry is about to happen.
    func retrying(_ retry: TransferRunner.Retry) {
        send(.retrying(retry))
    }

    /// The generation ended: the last message.
    func ended(_ end: DownloadManager.StateMachine<URL>.TransferEnd, result: TransferResult?) {
        send(.ended(end, result))
    }

    // MARK: - The actor's side

    /// The next message in the order told; `nil` after `ended`'s. Not ended by cancellation: a cancelled generation
    /// still reports how it ended.
    func next() async -> Message? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Message?, Never>) in
            let ready = queue.withLock { queue -> Message?? in
                if !queue.messages.isEmpty { return .some(queue.messages.removeFirst()) }
                if queue.ended { return .some(nil) }
                queue.waiter = continuation
                return .none
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    private func send(_ message: Message) {
        let waiter = queue.withLock { queue -> CheckedContinuation<Message?, Never>? in
            guard !queue.ended else { return nil }
            if case .ended = message { queue.ended = true }
            guard let waiter = queue.waiter else {
                queue.messages.append(message)
                return nil
            }
            queue.waiter = nil
            return waiter
        }
        waiter?.resume(returning: message)
    }
}
