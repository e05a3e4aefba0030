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
    ///   - partialKey: the download's key (`DownloadDirectory.key(for:)`), when the caller has it already.
    /// - Returns: how the generation ended, and the file it produced when it completed. A retry the server asked to
    ///   wait for (`Retry-After`) ends the generation (`.retryLater`): the download waits out of its slot.
    func run(
        url: URL, options: DownloadOptions, replacing: URL?, retriesMade: Int = 0, report: TransferReport,
        partialKey: String? = nil
    ) async -> (DownloadManager.StateMachine<DownloadKey>.TransferEnd, TransferResult?) {
        // Before any request (and off the manager's actor): a folder can never take the file.
        if let destination = options.destination,
            let refusal = FilePlacement.folderRefusal(at: destination, downloadURL: url.withoutCredentials)
        {
            return (.failed(refusal), nil)
        }
        var retries = Retries(limit: retryLimit, backoff: backoff, made: retriesMade)
        let limiters = [options.maximumBytesPerSecond.map(BandwidthLimiter.init), sharedLimiter].compactMap { $0 }
        // One rank for every attempt: a retry keeps the download's place at its host's gate.
        let rank = DispatchTime.now().uptimeNanoseconds
        // After an answer that was not HTTP, no more HEADs: a server that sends a body after one leaves it on the
        // connection that the next request reuses, and each retry would meet it again.
        var sendsHEAD = true
        while true {
            let transfer = Transfer(
                url: url, options: options, directory: directory, bridge: bridge, configuration: engine,
                replacing: replacing, limiters: limiters, rank: rank, observer: report, partialKey: partialKey,
                sendsHEAD: sendsHEAD)
            let attempt: Retries.AttemptEnd
            var result: TransferResult?
            do throws(DownloadError) {
                result = try await transfer.run()
                attempt = .completed(result?.checksum)
            } catch {
                if error.isNotHTTPAnswer { sendsHEAD = false }
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
        url: URL, options: DownloadOptions, replacing: URL?, retriesMade: Int, report: TransferReport,
        partialKey: String? = nil
    ) async {
        let (end, result) = await run(
            url: url, options: options, replacing: replacing, retriesMade: retriesMade, report: report,
            partialKey: partialKey)
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
            case end(DownloadManager.StateMachine<DownloadKey>.TransferEnd)
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
        ///   - random: a number in 0..<1, for the backoff's jitter; drawn only for a retry when `nil` (a draw is a
        ///     `getrandom(2)` call, which every completed file paid for; issue #52).
        /// - Returns: what follows.
        mutating func attemptEnded(_ end: AttemptEnd, cancelled: Bool, random: Double? = nil) -> Action {
            switch end {
            case .completed(let checksum):
                return .end(.completed(checksum))
            case .failed(let error):
                if error == .cancelled || cancelled { return .end(.cancelled) }
                guard error.isTransient, made < limit else { return .end(.failed(error)) }
                let delay = backoff.delay(
                    attempt: made, retryAfter: error.retryAfter, random: random ?? Double.random(in: 0..<1))
                made += 1
                return .retry(Retry(attempt: made, delay: delay, error: error))
            }
        }

        /// The backoff's wait was cancelled.
        func waitCancelled() -> DownloadManager.StateMachine<DownloadKey>.TransferEnd { .cancelled }
    }
}

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

/// The manager's end of one generation's `TransferObserver`: the one ordered way from a transfer, its retries and its
/// end up to the actor (issue #51).
///
/// - Counts (bytes on disk, the total, requests in flight) are kept under a lock where they change and read by the
///   manager's ticker: progress reaches the actor at most every tick, never once per chunk.
/// - The placement of a verified file is written to the journal before the file moves (synchronously: a crash during
///   the move is then recognised at the next start).
/// - Everything else — warnings, notes, retries and finally the generation's end — is a `Message` in one queue, handed
///   to the actor in the order told; the end is always last. While the generation runs, a message told is delivered by
///   a pump task started for it (`deliverWhileRunning`), which stops when the queue is empty: most small files tell
///   nothing before their end, and no task waits for news beside them (an `async let` reader cost 13,000 instructions
///   and a thread hand-off a file; issue #52). Once the runner returns, the generation's task takes the rest at once
///   (`rest()`, after the pump when one runs), the end last.
final class TransferReport: TransferObserver, Sendable {
    /// What the actor is told, in order.
    enum Message: Sendable {
        /// A warning or a note of the transfer.
        case said(TransferNews)
        /// A retry about to happen (before its backoff).
        case retrying(TransferRunner.Retry)
        /// How the generation ended, and the file it produced when it completed. The last message.
        case ended(DownloadManager.StateMachine<DownloadKey>.TransferEnd, TransferResult?)

        var isEnd: Bool {
            if case .ended = self { return true }
            return false
        }
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
        /// A batch forgets the download once it is told it completed: the placement line says so, and no removal line
        /// follows (`JournalEntry.forgetsWhenPlaced`).
        var forgetsWhenPlaced = false
    }

    private struct Queue {
        var messages: [Message] = []
        var waiter: CheckedContinuation<Message?, Never>?
        var ended = false
        /// Where messages told before the end go (`deliverWhileRunning`), whether a pump task is delivering them, and
        /// who waits for it to stop (`pumped()`).
        var deliver: (@Sendable (Message) async -> Void)?
        var pumping = false
        var pumpStopped: CheckedContinuation<Void, Never>?

        /// Whether a pump task must start now: messages to deliver before the end, a place to deliver them, and none
        /// running. Marks it running.
        mutating func startsPump() -> Bool {
            guard deliver != nil, !pumping, let first = messages.first, !first.isEnd else { return false }
            pumping = true
            return true
        }
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
            name: file.name, length: file.length, checksum: file.checksum,
            suggested: file.suggestedFilename, forgetsWhenPlaced: placement.forgetsWhenPlaced)
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
    func ended(_ end: DownloadManager.StateMachine<DownloadKey>.TransferEnd, result: TransferResult?) {
        send(.ended(end, result))
    }

    // MARK: - The actor's side

    /// Delivers the messages told from now on (and any waiting), but the end, to `deliver`, in order, one at a time,
    /// from a task started when one is told and ended when none is left.
    func deliverWhileRunning(_ deliver: @escaping @Sendable (Message) async -> Void) {
        let starts = queue.withLock { queue -> Bool in
            queue.deliver = deliver
            return queue.startsPump()
        }
        if starts { startPump() }
    }

    /// Returns once no pump task delivers (at once when none does): after the end was told, what is left in the queue
    /// is for `next()`.
    func pumped() async {
        await withCheckedContinuation { (stopped: CheckedContinuation<Void, Never>) in
            let running = queue.withLock { queue -> Bool in
                guard queue.pumping else { return false }
                queue.pumpStopped = stopped
                return true
            }
            if !running { stopped.resume() }
        }
    }

    private func startPump() {
        Task { [self] in
            while true {
                let (message, deliver, stopped) = queue.withLock {
                    queue -> (Message?, (@Sendable (Message) async -> Void)?, CheckedContinuation<Void, Never>?) in
                    if let first = queue.messages.first, !first.isEnd {
                        queue.messages.removeFirst()
                        return (first, queue.deliver, nil)
                    }
                    queue.pumping = false
                    defer { queue.pumpStopped = nil }
                    return (nil, nil, queue.pumpStopped)
                }
                guard let message, let deliver else {
                    stopped?.resume()
                    return
                }
                await deliver(message)
            }
        }
    }

    /// After the end was told: the messages no pump delivered, in order, the end last — taken at once when no pump
    /// runs (most small files), else once it stopped. One hand-over instead of a continuation for `pumped()` and one
    /// for each `next()` (three task switches a file; issue #52).
    func rest() async -> [Message] {
        if let taken = takeUnlessPumping() { return taken }
        await pumped()
        return takeUnlessPumping() ?? []
    }

    /// Every message waiting, unless a pump task is delivering them.
    private func takeUnlessPumping() -> [Message]? {
        queue.withLock { queue -> [Message]? in
            guard !queue.pumping else { return nil }
            defer { queue.messages = [] }
            return queue.messages
        }
    }

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
        let (waiter, starts) = queue.withLock { queue -> (CheckedContinuation<Message?, Never>?, Bool) in
            guard !queue.ended else { return (nil, false) }
            if message.isEnd { queue.ended = true }
            guard let waiter = queue.waiter else {
                queue.messages.append(message)
                return (nil, queue.startsPump())
            }
            queue.waiter = nil
            return (waiter, false)
        }
        waiter?.resume(returning: message)
        if starts { startPump() }
    }
}
