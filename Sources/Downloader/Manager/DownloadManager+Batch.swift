import Foundation

/// Lists of any length: requests read from an asynchronous sequence as they are needed, outcomes delivered as
/// downloads end, and finished downloads leaving memory, so a million URLs cost what a few thousand do.
extension DownloadManager {
    /// Downloads every request of a sequence, reading the next one only when fewer than `maximumInFlight` are taken
    /// and not yet delivered, and delivers each outcome as its download ends (completion order).
    ///
    /// Memory stays bounded whatever the sequence's length: requests are read as slots free (a consumer that stops
    /// reading outcomes stops the intake), they reach the manager in the sequence's order (parked ones aside, below;
    /// `prioritization` orders those waiting), and a download that completes leaves the manager once its outcome is delivered, as by
    /// `forget(_:)`: its file stays, recording the URL, version and digest in its extended attributes, so that a
    /// later request of the URL (another run of the same list) costs a `HEAD`, not the file. A download that fails,
    /// is suspended or removed stays known, so that `resume(_:)`, `receipt(for:)` or a later batch continues it from
    /// its partial file.
    ///
    /// New work comes first: a request whose file an earlier download delivered (its extended attributes name the
    /// URL) is parked on disk, in the state folder, and the intake reads on, so the same list run again after an
    /// interruption starts on the files it lacks at once instead of asking about every finished one first. Parked
    /// requests reach the manager in order: one whenever a request is read while the batch has nothing else in
    /// flight, all of them once the sequence has ended (so a pipe that pauses leaves them parked until its next line
    /// or its end: their files are there, only the question whether they are current waits); they hold no slot. Requests that carry a secret (credentials in a URL, an
    /// `Authorization`, `Cookie` or `Proxy-Authorization` header) are never parked: secrets never reach the disk.
    ///
    /// Each request is handled as by `download(_:options:)`: a URL asked twice joins the running download; options
    /// and expected checksums follow the same rules. Ending the iteration early (leaving the loop, or cancelling its
    /// task) stops the intake and suspends the downloads in flight that nobody else waits for, their partial files
    /// kept.
    /// - Parameters:
    ///   - requests: the requests, in the order they should start; read lazily (a pipe, a file read line by line).
    ///   - maximumInFlight: how many requests may be read and not yet delivered; by default 1,000 (a list shorter
    ///     than that is queued whole, as by `enqueue`), at least 1. Once that many are, reading goes on when an eighth
    ///     of them (at most 64) are delivered, not after each one.
    /// - Returns: the outcomes, one per request, ending after the last request's outcome.
    @available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
    public nonisolated func download(
        _ requests: some AsyncSequence<DownloadRequest, Never> & Sendable, maximumInFlight: Int? = nil
    ) -> DownloadOutcomes {
        startBatch(AsyncIntake(base: requests.makeAsyncIterator()), maximumInFlight: maximumInFlight)
    }

    /// Downloads every request of a collection or sequence, as `download(_:maximumInFlight:)` does for an
    /// asynchronous one; a lazy sequence (`(0..<n).lazy.map { … }`) makes each request only when it is read.
    ///
    /// Unlike the asynchronous form, this one needs no Swift 6 runtime: it runs on macOS 13 and iOS 16.
    public nonisolated func download(
        _ requests: sending some Sequence<DownloadRequest>, maximumInFlight: Int? = nil
    ) -> DownloadOutcomes {
        startBatch(SequenceIntake(base: requests.makeIterator()), maximumInFlight: maximumInFlight)
    }

    /// Starts a batch's driver on `intake`: the outcome stream, and what its end (or the consumer's leaving) does.
    private nonisolated func startBatch(
        _ intake: sending any RequestIntake, maximumInFlight: Int?
    ) -> DownloadOutcomes {
        let (stream, continuation) = AsyncStream<DownloadOutcome>.makeStream()
        let batch = Batch(limit: max(1, maximumInFlight ?? 1000), outcomes: continuation)
        let driver = Task {
            var feeder = BatchFeeder(manager: self, batch: batch)
            await feeder.run(intake)
        }
        continuation.onTermination = { _ in
            driver.cancel()
            let abandoned = batch.close()
            guard !abandoned.isEmpty else { return }
            Task { await self.abandon(abandoned) }
        }
        return DownloadOutcomes(base: stream, batch: batch)
    }

    /// Hands one request of a batch to the machine, with a waiter that delivers its outcome.
    /// - Returns: whether the batch may go on: `false` once the manager shuts down (the request is answered with
    ///   `.cancelled`, and the rest of the sequence is not read).
    func submit(_ request: DownloadRequest, to batch: Batch) -> Bool {
        let key = identify(request.url)
        let id = makeNumber()
        batch.started(id, key: key)
        recipients[id] = .batch(batch, request)
        self.request(key, options: request.options, waiter: id, forgetsWhenAnswered: true)
        return !machine.isShuttingDown
    }

    /// The consumer left: its waiters give up, which suspends the downloads nobody else waits for.
    private func abandon(_ waiters: [(id: Machine.WaiterID, key: DownloadKey)]) {
        for waiter in waiters { cancelWaiter(waiter.id, of: waiter.key) }
    }
}

/// Where a batch reads its requests: only the batch's driver calls `next()`, one call at a time.
protocol RequestIntake {
    /// The next request, or `nil` after the last.
    mutating func next() async -> DownloadRequest?
}

/// A plain sequence's iterator as an intake. It is made from a value given with `sending` (no one else has it).
private struct SequenceIntake<Base: IteratorProtocol>: RequestIntake where Base.Element == DownloadRequest {
    var base: Base
    mutating func next() async -> DownloadRequest? { base.next() }
}

/// An asynchronous sequence's iterator as an intake; its `Failure` type and `next(isolation:)` need Swift 6's runtime.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
private struct AsyncIntake<Base: AsyncIteratorProtocol>: RequestIntake
where Base.Element == DownloadRequest, Base.Failure == Never {
    var base: Base
    mutating func next() async -> DownloadRequest? { await base.next(isolation: nil) }
}

/// The outcomes of a batch (`DownloadManager.download(_:maximumInFlight:)`), one per request, in the order the
/// downloads end. Iterate it once; leaving the iteration ends the batch.
public struct DownloadOutcomes: AsyncSequence, Sendable {
    public typealias Element = DownloadOutcome
    public typealias Failure = Never

    let base: AsyncStream<DownloadOutcome>
    let batch: DownloadManager.Batch

    /// The iterator: taking an outcome frees a slot for the next request.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<DownloadOutcome>.Iterator
        let batch: DownloadManager.Batch

        /// The next outcome, or `nil` after the last.
        public mutating func next() async -> DownloadOutcome? {
            let outcome = await base.next()
            if outcome != nil { batch.give() }
            return outcome
        }

        /// The next outcome, or `nil` after the last, on the caller's actor.
        @available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
        public mutating func next(isolation actor: isolated (any Actor)?) async -> DownloadOutcome? {
            let outcome = await base.next(isolation: actor)
            if outcome != nil { batch.give() }
            return outcome
        }
    }

    /// Starts the iteration.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), batch: batch)
    }
}

extension DownloadManager {
    /// The bookkeeping of one batch: free slots (one spent per request read, one given back per outcome taken by the
    /// consumer), the requests in flight, and when the outcome stream ends (the intake ended and every request taken
    /// is delivered).
    final class Batch: Sendable {
        private struct State {
            var slots: BatchSlots
            /// The driver, waiting for a slot.
            var taker: CheckedContinuation<Bool, Never>?
            var intakeEnded = false
            var inFlight: [Machine.WaiterID: DownloadKey] = [:]
        }

        private let state: Locked<State>
        private let outcomes: AsyncStream<DownloadOutcome>.Continuation

        init(limit: Int, outcomes: AsyncStream<DownloadOutcome>.Continuation) {
            state = Locked(State(slots: BatchSlots(limit: limit)))
            self.outcomes = outcomes
        }

        /// Spends a slot, waiting for one if none is free (`BatchSlots`: a waiting driver is woken once several are).
        /// - Returns: `false` once the batch is closed (its consumer left).
        func take() async -> Bool {
            // A free slot is taken without suspending (most of the time, while a long list is read).
            switch state.withLock({ $0.slots.take(waits: false) }) {
            case .taken: return true
            case .closed: return false
            case .mustWait: break
            }
            return await withCheckedContinuation { continuation in
                let answer: Bool? = state.withLock { state in
                    switch state.slots.take(waits: true) {
                    case .taken: return true
                    case .closed: return false
                    case .mustWait:
                        state.taker = continuation  // one taker: the batch's driver
                        return nil
                    }
                }
                if let answer { continuation.resume(returning: answer) }
            }
        }

        /// Gives a slot back (the consumer took an outcome).
        func give() {
            let taker = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                guard state.slots.give() else { return nil }
                defer { state.taker = nil }
                return state.taker
            }
            taker?.resume(returning: true)
        }

        /// How many requests were handed to the manager and not yet delivered.
        var inFlightCount: Int { state.withLock { $0.inFlight.count } }

        /// A request was handed to the manager with waiter `id`.
        func started(_ id: Machine.WaiterID, key: DownloadKey) {
            state.withLock { $0.inFlight[id] = key }
        }

        /// Delivers the outcome of waiter `id`, ending the stream after the last one.
        func deliver(
            _ id: Machine.WaiterID, _ request: DownloadRequest, _ result: Result<DownloadReceipt, DownloadError>
        ) {
            let outcome = DownloadOutcome(request: request, result: result)
            // Yielded under the lock, with the removal: `endIntake` cannot see the batch empty and finish the stream
            // between the two (the outcome would be dropped). `finish` runs outside it: it calls `onTermination`.
            let isLast = state.withLock { state -> Bool in
                state.inFlight[id] = nil
                outcomes.yield(outcome)
                return state.intakeEnded && state.inFlight.isEmpty
            }
            if isLast { outcomes.finish() }
        }

        /// No request will be read any more: the stream ends once those in flight are delivered.
        func endIntake() {
            let isLast = state.withLock { state -> Bool in
                state.intakeEnded = true
                return state.inFlight.isEmpty
            }
            if isLast { outcomes.finish() }
        }

        /// The consumer left: no more requests are read.
        /// - Returns: the waiters still in flight, to be given up.
        func close() -> [(id: Machine.WaiterID, key: DownloadKey)] {
            let (taker, abandoned) = state.withLock { state in
                state.slots.close()
                defer {
                    state.taker = nil
                    state.inFlight = [:]
                }
                return (state.taker, state.inFlight.map { (id: $0.key, key: $0.value) })
            }
            taker?.resume(returning: false)
            return abandoned
        }
    }
}

extension DownloadManager {
    /// The driver of one batch: reads the requests as slots free and hands them to the manager, new work first.
    ///
    /// A request whose file an earlier download delivered (`hasDeliveredFile`) costs a `HEAD` and usually nothing
    /// more, so it is parked (`RequestSpill`, on disk) and the intake reads on: the same list run again after an
    /// interruption starts on the files it lacks at once instead of asking about every finished one first. A parked
    /// request goes to the manager whenever the batch has nothing else in flight (one at a time, so a new request
    /// found meanwhile waits for at most that one), and all of them once the intake has ended.
    struct BatchFeeder {
        let manager: DownloadManager
        let batch: Batch
        private var parked: RequestSpill?
        private var canPark = true

        init(manager: DownloadManager, batch: Batch) {
            self.manager = manager
            self.batch = batch
        }

        /// Reads the whole sequence (unless the consumer leaves or the manager shuts down), then ends the intake.
        mutating func run(_ requests: consuming any RequestIntake) async {
            var intake = requests
            var intakeEnded = false
            // The slot first, then the request: a request is read only when it can be taken.
            while await batch.take() {
                if !intakeEnded {
                    guard let request = await intake.next() else {
                        intakeEnded = true
                        batch.give()
                        continue
                    }
                    if park(request) {
                        batch.give()  // a parked request holds no slot
                        guard await submitParkedIfIdle() else { break }
                        continue
                    }
                    guard await manager.submit(request, to: batch) else { break }
                } else {
                    guard let request = parked?.next() else {
                        batch.give()
                        break
                    }
                    guard await manager.submit(request, to: batch) else { break }
                }
            }
            parked = nil
            batch.endIntake()
        }

        /// Parks a request whose file an earlier download delivered. - Returns: whether it was parked.
        private mutating func park(_ request: DownloadRequest) -> Bool {
            guard canPark, manager.hasDeliveredFile(request) else { return false }
            if parked == nil {
                parked = RequestSpill(in: manager.directory.state)
                canPark = parked != nil
            }
            return parked?.park(request) ?? false
        }

        /// With nothing of the batch in flight, hands over one parked request: the intake keeps the CPU (a rerun of a
        /// long list reads past its finished files first), and a pipe that writes slowly still sees progress.
        /// - Returns: `false` when the batch is over (the consumer left, or the manager shuts down).
        private mutating func submitParkedIfIdle() async -> Bool {
            guard let parked, parked.count > 0, batch.inFlightCount == 0 else { return true }
            guard await batch.take() else { return false }
            guard let request = parked.next() else {
                batch.give()
                return true
            }
            return await manager.submit(request, to: batch)
        }
    }

    /// Whether an earlier download of this request's URL delivered a file where this one would put it (its extended
    /// attributes name the URL): a local look, without reading the file; the transfer decides whether it is reused.
    nonisolated func hasDeliveredFile(_ request: DownloadRequest) -> Bool {
        let url = request.url.withoutCredentials
        return FileRecord.recordsOrigin(atPath: directory.deliveredFilePath(of: url, options: request.options), url)
    }
}
