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
    ///     than that is queued whole, as by `enqueue`), at least 1.
    /// - Returns: the outcomes, one per request, ending after the last request's outcome.
    public nonisolated func download(
        _ requests: some AsyncSequence<DownloadRequest, Never> & Sendable, maximumInFlight: Int? = nil
    ) -> DownloadOutcomes {
        let (stream, continuation) = AsyncStream<DownloadOutcome>.makeStream()
        let batch = Batch(limit: max(1, maximumInFlight ?? 1000), outcomes: continuation)
        let driver = Task {
            var feeder = BatchFeeder(manager: self, batch: batch)
            await feeder.run(requests)
        }
        continuation.onTermination = { _ in
            driver.cancel()
            let abandoned = batch.close()
            guard !abandoned.isEmpty else { return }
            Task { await self.abandon(abandoned) }
        }
        return DownloadOutcomes(base: stream, batch: batch)
    }

    /// Downloads every request of a collection or sequence, as `download(_:maximumInFlight:)` does for an
    /// asynchronous one; a lazy sequence (`(0..<n).lazy.map { … }`) makes each request only when it is read.
    public nonisolated func download(
        _ requests: sending some Sequence<DownloadRequest>, maximumInFlight: Int? = nil
    ) -> DownloadOutcomes {
        download(SentRequests(requests: requests), maximumInFlight: maximumInFlight)
    }

    /// Hands one request of a batch to the machine, with a waiter that delivers its outcome.
    /// - Returns: whether the batch may go on: `false` once the manager shuts down (the request is answered with
    ///   `.cancelled`, and the rest of the sequence is not read).
    func submit(_ request: DownloadRequest, to batch: Batch) -> Bool {
        let url = identify(request.url)
        let id = makeWaiterID()
        batch.started(id, url: url)
        recipients[id] = .batch(batch, request)
        self.request(url, options: request.options, waiter: id)
        return !machine.isShuttingDown
    }

    /// Forgets the batches' downloads that completed, unless they are asked again or still being verified for
    /// someone (their files stay).
    func forgetCompletedInBatches() {
        while let url = completedInBatches.popLast() {
            if machine.isSettled(url) { forget(url) }
        }
    }

    /// The consumer left: its waiters give up, which suspends the downloads nobody else waits for.
    private func abandon(_ waiters: [(id: Machine.WaiterID, url: URL)]) {
        for waiter in waiters { cancelWaiter(waiter.id, of: waiter.url) }
    }
}

/// A plain sequence read as an asynchronous one. It holds a value given with `sending` (no one else has it), and
/// only the batch's driver iterates it, so it may cross to the driver's task.
private struct SentRequests<Base: Sequence>: AsyncSequence, @unchecked Sendable
where Base.Element == DownloadRequest {
    let requests: Base

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.Iterator
        mutating func next() async -> DownloadRequest? { base.next() }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: requests.makeIterator()) }
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

        /// The next outcome, or `nil` after the last.
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
