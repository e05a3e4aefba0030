import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The sink of one GET: carries out `ResponseJudge`'s verdict on the response, then sends the body to the job's disk
/// stages, counting bytes itself.
///
/// It runs on the delegate queue and holds the transfer's network side (`TransferPosition`) while the request runs;
/// `Transfer` takes it back when the request has ended. It never waits for the disk: what the disk must do (start
/// over, save the state, write) is sent as commands in order, so one transfer's disk backlog never stalls the delegate
/// queue that every download shares.
final class WindowSink: TransferSink, @unchecked Sendable {
    private let job: TransferJob
    /// The first byte asked for.
    private let start: Int64
    /// The last byte asked for, when the request had a closed range.
    private let end: Int64?
    /// Whether the request carried a `Range` header.
    private let ranged: Bool
    /// Bytes the file already has just before the resume point, asked for again to compare (no strong validator);
    /// the resume point is `start + overlap.count`.
    private let overlap: Data
    /// How many of them have been compared.
    private var compared = 0
    /// Where new bytes begin: a response starting here or before continues the file.
    private var resumeOffset: Int64 { start + Int64(overlap.count) }
    private let checkpointInterval: Int64
    /// The most received bytes that may wait to be written while a whole file streams in one response (see
    /// `Transfer.Configuration.maximumUnwrittenBytes`).
    private let maximumUnwritten: Int64
    /// For a window grown past the base size (see `Transfer.Configuration.maximumWindowSize`), the most received bytes
    /// that may wait for the disk before the window ends early; `nil` for a window its own length bounds.
    private let grownWindowLimit: Int64?
    /// Whether the response must continue the version the file has (a mirror without an expected checksum): another
    /// version fails the request rather than starting the file again.
    private let sameVersionOnly: Bool
    /// For a run's first request on a new connection, when to cut it short (`nil` once judged, or for any other).
    private var firstRequestBudget: FirstRequestBudget?
    /// Whether the budget's judgement time was handed to the bridge (`takeCheckTime()`).
    private var judgementScheduled = false

    /// The network side, owned by this sink until the request ends.
    private(set) var position: TransferPosition
    private var expectedBodyLength: Int64?
    /// Body bytes received by this request (sent to the disk).
    private(set) var received: Int64 = 0
    /// Whether this response streams the whole resource (a 200).
    private(set) var isWholeStream = false
    /// Whether it streams a version other than the one being fetched (an `If-Range` that failed): a restart.
    private(set) var isOtherVersion = false
    /// Opens when the disk has written and hashed the first half of this response's body.
    private(set) var halfway: DiskFence?
    /// The most received bytes that waited for the disk at once while this response arrived.
    private(set) var peakUnwritten: Int64 = 0
    /// `job.readBackBytes` when the response began, and whether it grew before the response ended: the hash stage
    /// fell behind, and what it had not hashed was dropped from memory to be read back.
    private var readBackAtStart: Int64 = 0
    private(set) var hashFellBehind = false
    /// The URL that answered, after any redirects.
    private(set) var respondingURL: URL?

    init(
        job: TransferJob, position: TransferPosition, start: Int64, end: Int64?, ranged: Bool, overlap: Data = Data(),
        checkpointInterval: Int64, maximumUnwritten: Int64 = Transfer.Configuration().maximumUnwrittenBytes,
        grownWindowLimit: Int64? = nil, sameVersionOnly: Bool = false, firstRequestBudget: FirstRequestBudget? = nil
    ) {
        self.firstRequestBudget = firstRequestBudget
        self.sameVersionOnly = sameVersionOnly
        self.maximumUnwritten = maximumUnwritten
        self.grownWindowLimit = grownWindowLimit
        self.job = job
        self.position = position
        self.start = start
        self.end = end
        self.ranged = ranged
        self.overlap = overlap
        self.checkpointInterval = checkpointInterval
    }

    func receive(response: URLResponse) -> RequestEnd? {
        guard let http = response as? HTTPURLResponse else {
            return .failed(.invalidResponse(job.url, reason: "not an HTTP response"))
        }
        respondingURL = http.url
        readBackAtStart = job.readBackBytes
        let request = WindowRequest(
            start: start, end: end, ranged: ranged, resumeOffset: resumeOffset, windowSize: checkpointInterval)
        var saveNow = false
        let verdict = ResponseJudge.judge(http.head, request: request, known: position.metadata, url: job.url)
        if sameVersionOnly, let reason = Self.anotherVersion(verdict, known: position.metadata.validators) {
            return .failed(
                .invalidResponse(job.url, reason: "the mirror \(http.url?.redactedAbsoluteString ?? "") \(reason)"))
        }
        switch verdict {
        case .end(let end):
            return end
        case .append(let metadata, let bodyLength):
            position.metadata = metadata
            expectedBodyLength = bodyLength
        case .begin(let metadata, let bodyLength, let checkpoint):
            position.metadata = metadata
            expectedBodyLength = bodyLength
            position.startOver()
            job.send(.startOver(announced: metadata.announced))
            saveNow = checkpoint
        case .replace(let metadata, let bodyLength, let checkpoint):
            // The disk finishes what it has (an older version's bytes, rarely), then starts over. Without validators
            // to prove it the same, a whole body replacing bytes on disk counts as another version (a restart).
            let known = position.metadata.validators
            isOtherVersion = known.isEmpty || metadata.validators.differs(from: known)
            position.metadata = metadata
            expectedBodyLength = bodyLength
            isWholeStream = true
            compared = overlap.count  // a whole body starts the file again: nothing to compare
            position.startOver()
            job.send(.startOver(announced: metadata.announced))
            saveNow = checkpoint
        }
        position.keepsRecentBytes = !position.metadata.validators.hasStrongETag
        if saveNow { job.send(.checkpoint(position.metadata)) }
        // A long response saves the state as it goes (a window of the base size is saved when it ends).
        let every = isWholeStream || grownWindowLimit != nil ? checkpointInterval : nil
        if let failure = job.send(.describe(position.metadata, checkpointEvery: every)) { return .failed(failure) }
        return nil
    }

    func receive(data chunk: Data) -> RequestEnd? {
        var data = chunk
        if compared < overlap.count {
            // The bytes before the resume point must be the ones the file has: otherwise the resource changed.
            let count = min(overlap.count - compared, data.count)
            let expected = overlap[(overlap.startIndex + compared)..<(overlap.startIndex + compared + count)]
            guard data.prefix(count).elementsEqual(expected) else {
                return .restartFromZero(
                    reason: "the resource changed: the bytes before \(resumeOffset) differ (it sends no validator)")
            }
            compared += count
            received += Int64(count)
            guard count < data.count else { return nil }
            data = Data(data.dropFirst(count))
        }
        let count = Int64(data.count)
        if let expectedBodyLength, received + count > expectedBodyLength {
            return .failed(
                .invalidResponse(
                    job.url, reason: "the server sent more than the \(expectedBodyLength) bytes it announced"))
        }
        received += count
        position.accept(data)
        if let failure = job.send(.write(data)) { return .failed(failure) }
        if halfway == nil, let expectedBodyLength, received >= expectedBodyLength / 2 { halfway = job.fence() }
        let unwritten = job.unwrittenBytes
        peakUnwritten = max(peakUnwritten, unwritten)
        if isWholeStream && unwritten > maximumUnwritten { return diskFellBehind() }
        // A grown window while the disk slowed down: the rest comes in windows of the base size.
        if let grownWindowLimit, !isWholeStream, unwritten > grownWindowLimit { return .diskBehind }
        // The clock is read only while a first request's budget is being judged, not for every chunk of every request.
        guard firstRequestBudget != nil else { return nil }
        return spentFirstRequestBudget(now: DispatchTime.now().uptimeNanoseconds) ? .cutShort : nil
    }

    /// The first request's budget is judged a quarter of a second after its first bytes, also when no more came.
    func takeCheckTime() -> UInt64? {
        guard !judgementScheduled, let time = firstRequestBudget?.judgementTime else { return nil }
        judgementScheduled = true
        return time
    }

    func check(now: UInt64) -> RequestEnd? {
        spentFirstRequestBudget(now: now) ? .cutShort : nil
    }

    /// Whether this request, a run's first on a new connection, would spin a core for long and ends here
    /// (`FirstRequestBudget`). Only a ranged response of known length is cut: its rest can be asked for.
    private func spentFirstRequestBudget(now: UInt64) -> Bool {
        guard var budget = firstRequestBudget else { return false }
        guard let expectedBodyLength, !isWholeStream else {
            firstRequestBudget = nil
            return false
        }
        let cut = budget.bodyArrived(received: received, left: expectedBodyLength - received, now: now)
        firstRequestBudget = budget.isDecided ? nil : budget
        return cut
    }

    /// Why a verdict shows a version other than the file's (`nil`: the same version).
    private static func anotherVersion(_ verdict: ResponseVerdict, known: Validators) -> String? {
        switch verdict {
        case .end(.restartFromZero(let reason)), .end(.unreliableETag(let reason)):
            return "has another version: \(reason)"
        case .replace(let metadata, _, _) where known.isEmpty || metadata.validators.differs(from: known):
            return "answered with the whole of another version"
        case .append, .begin, .replace, .end:
            return nil
        }
    }

    /// A whole file streaming faster than the disk writes it: Linux URLSession cannot slow a response down, so the
    /// response ends here rather than hold more in memory. A server that honours Range is asked for the rest in
    /// windows (bounded by the disk); one that does not cannot be resumed, and the download fails clearly.
    private func diskFellBehind() -> RequestEnd {
        let metadata = position.metadata
        if metadata.rangesSupported && metadata.validators.ifRange != nil && metadata.totalLength != nil {
            return .diskBehind
        }
        return .failed(
            .fileSystem(
                job.url,
                reason: "the disk fell more than \(maximumUnwritten >> 20) MiB behind the network, and this server "
                    + "sends the whole file in one response (it ignores Range), so the download cannot wait for the "
                    + "disk: it stops rather than hold the file in memory; try again when the disk is less busy"))
    }

    func complete(error: (any Error)?) -> RequestEnd {
        if let failure = job.failure { return .failed(failure) }
        hashFellBehind = job.readBackBytes > readBackAtStart
        // Success is judged by our own accounting: every byte the Content-Range announced arrived (and was sent to
        // the disk, which reports its own errors). A transport complaint after that (a Content-Length larger than
        // the body) changes nothing.
        let gotEverything = expectedBodyLength.map { received == $0 } ?? false
        if let error, !gotEverything {
            return .failed(TransportError.failure(error, url: job.url))
        }
        if let expectedBodyLength, received < expectedBodyLength {
            return .failed(
                .connectionFailed(job.url, reason: "the body ended after \(received) of \(expectedBodyLength) bytes"))
        }
        if isWholeStream && position.metadata.totalLength == nil { position.metadata.totalLength = position.offset }
        return .finished
    }
}

/// The sink of the HEAD probe: keeps the response (behind a lock: the caller may be resumed from another thread when
/// a closed request never completes).
final class ProbeSink: TransferSink, Sendable {
    private let url: URL
    private let stored = Locked<HTTPURLResponse?>(nil)

    init(url: URL) {
        self.url = url
    }

    var response: HTTPURLResponse? { stored.withLock { $0 } }

    func receive(response: URLResponse) -> RequestEnd? {
        stored.withLock { $0 = response as? HTTPURLResponse }
        return nil
    }

    func receive(data: Data) -> RequestEnd? { nil }

    func complete(error: (any Error)?) -> RequestEnd {
        if let error {
            return .failed(TransportError.failure(error, url: url))
        }
        return .finished
    }
}
