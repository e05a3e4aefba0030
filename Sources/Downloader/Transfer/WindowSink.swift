import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The sink of one GET: carries out `ResponseJudge`'s verdict on the response, then sends the body to the pipeline's disk
/// stages, counting bytes itself.
///
/// It runs on the delegate queue and holds the transfer's network side (`TransferPosition`) while the request runs;
/// `Transfer` takes it back when the request has ended. It never waits for the disk: what the disk must do (start
/// over, save the state, write) is sent as commands in order, so one transfer's disk backlog never stalls the delegate
/// queue that every download shares.
final class WindowSink: TransferSink, @unchecked Sendable {
    private let pipeline: DiskPipeline
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
    /// When the request ends before its last byte (the disk behind, a grown window, a slow first request).
    private var endRule: Transfer.StateMachine.WindowEndRule
    /// What the response is, for `endRule`.
    private var ruleResponse = Transfer.StateMachine.WindowEndRule.Response(isWholeStream: false, resumable: false)
    /// Whether the response must continue the version the file has (a mirror without an expected checksum): another
    /// version fails the request rather than starting the file again.
    private let sameVersionOnly: Bool
    /// Once this sink ended its request early: the most unwritten bytes up to which the bytes that still arrive are
    /// kept (see `keepsData(after:)`), and whether one was dropped (every later one then is too: a gap).
    private var lateLimit: Int64?
    private var droppingLate = false
    /// Whether the first request's judgement time was handed to the bridge (`takeCheckTime()`).
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
    /// `pipeline.readBackBytes` when the response began, and whether it grew before the response ended: the hash stage
    /// fell behind, and what it had not hashed was dropped from memory to be read back.
    private var readBackAtStart: Int64 = 0
    private(set) var hashFellBehind = false
    /// The URL that answered, after any redirects.
    private(set) var respondingURL: URL?

    init(
        pipeline: DiskPipeline, position: TransferPosition, start: Int64, end: Int64?, ranged: Bool,
        overlap: Data = Data(),
        checkpointInterval: Int64, maximumUnwritten: Int64 = Transfer.Configuration().maximumUnwrittenBytes,
        behindGrace: UInt64 = Transfer.Configuration().diskBehindGrace, grownWindowLimit: Int64? = nil,
        sameVersionOnly: Bool = false, firstRequestBudget: FirstRequestBudget? = nil
    ) {
        endRule = .init(
            softUnwritten: maximumUnwritten, behindGrace: behindGrace, grownLimit: grownWindowLimit,
            firstRequestBudget: firstRequestBudget)
        self.sameVersionOnly = sameVersionOnly
        self.pipeline = pipeline
        self.position = position
        self.start = start
        self.end = end
        self.ranged = ranged
        self.overlap = overlap
        self.checkpointInterval = checkpointInterval
    }

    func receive(response: URLResponse) -> RequestEnd? {
        guard let http = response as? HTTPURLResponse else {
            return .failed(.invalidResponse(pipeline.url, reason: "not an HTTP response"))
        }
        respondingURL = http.url
        readBackAtStart = pipeline.readBackBytes
        let request = WindowRequest(
            start: start, end: end, ranged: ranged, resumeOffset: resumeOffset, windowSize: checkpointInterval)
        var saveNow = false
        let verdict = ResponseJudge.judge(http.head, request: request, known: position.metadata, url: pipeline.url)
        if sameVersionOnly, let reason = Self.anotherVersion(verdict, known: position.metadata.validators) {
            return .failed(
                .invalidResponse(pipeline.url, reason: "the mirror \(http.url?.redactedAbsoluteString ?? "") \(reason)")
            )
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
            pipeline.send(.startOver(announced: metadata.announced))
            saveNow = checkpoint
        case .replace(let metadata, let bodyLength, let checkpoint):
            // The disk finishes what it has (an older version's bytes, rarely), then starts over. Without validators
            // to prove it the same, a whole body replacing bytes on disk counts as another version (a restart); one
            // that replaces nothing (a fresh download) is none.
            let known = position.metadata.validators
            isOtherVersion = position.offset > 0 && (known.isEmpty || metadata.validators.differs(from: known))
            position.metadata = metadata
            expectedBodyLength = bodyLength
            isWholeStream = true
            compared = overlap.count  // a whole body starts the file again: nothing to compare
            position.startOver()
            pipeline.send(.startOver(announced: metadata.announced))
            saveNow = checkpoint
        }
        position.keepsRecentBytes = !position.metadata.validators.hasStrongETag
        if saveNow { pipeline.send(.checkpoint(position.metadata)) }
        let metadata = position.metadata
        let resumable = metadata.rangesSupported && metadata.validators.ifRange != nil
        ruleResponse = .init(
            isWholeStream: isWholeStream, resumable: resumable && metadata.totalLength != nil,
            expectedBodyLength: expectedBodyLength)
        // A long response saves the state as it goes (a window of the base size is saved when it ends) — unless no
        // later run could continue from it (no Range, or no validator to send as If-Range): then each save would
        // only sync the file (fdatasync stalls the writer) for bytes a rerun must fetch again anyway.
        let every = (isWholeStream && resumable) || endRule.grownLimit != nil ? checkpointInterval : nil
        if let failure = pipeline.send(.describe(position.metadata, checkpointEvery: every)) { return .failed(failure) }
        return nil
    }

    func receive(data chunk: Data) -> RequestEnd? {
        if let lateLimit {
            // Ended early: a byte that still arrives is kept while memory allows, never asked for again.
            guard !droppingLate, pipeline.unwrittenBytes + Int64(chunk.count) <= lateLimit else {
                droppingLate = true
                return nil
            }
        }
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
                    pipeline.url, reason: "the server sent more than the \(expectedBodyLength) bytes it announced"))
        }
        received += count
        position.accept(data)
        if let failure = pipeline.send(.write(data)) { return .failed(failure) }
        if halfway == nil, let expectedBodyLength, received >= expectedBodyLength / 2 { halfway = pipeline.fence() }
        let unwritten = pipeline.unwrittenBytes
        peakUnwritten = max(peakUnwritten, unwritten)
        // The clock is read only while a decision needs it, not for every chunk of every request.
        let verdict = endRule.chunkArrived(received: received, unwritten: unwritten, response: ruleResponse) {
            DispatchTime.now().uptimeNanoseconds
        }
        return end(for: verdict)
    }

    /// What a verdict of the end rule means for this request.
    private func end(for verdict: Transfer.StateMachine.WindowEndRule.Verdict) -> RequestEnd? {
        guard lateLimit == nil else { return nil }  // ended already: late bytes only
        switch verdict {
        case .proceed: return nil
        case .diskBehind:
            lateLimit = endRule.lateDataLimit
            return .diskBehind
        case .cutShort:
            lateLimit = endRule.lateDataLimit
            return .cutShort
        case .cannotWait: return diskFellBehind()
        }
    }

    /// The first request's budget is judged a quarter of a second after its first bytes, also when no more came.
    func takeCheckTime() -> UInt64? {
        guard !judgementScheduled, let time = endRule.judgementTime else { return nil }
        judgementScheduled = true
        return time
    }

    func check(now: UInt64) -> RequestEnd? {
        end(for: endRule.judge(received: received, response: ruleResponse, now: now))
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

    /// The disk stayed behind a whole file that cannot be resumed for longer than the end rule allows: Linux
    /// URLSession cannot slow a response down, so the download fails clearly rather than hold the file in memory.
    private func diskFellBehind() -> RequestEnd {
        .failed(
            .fileSystem(
                pipeline.url,
                reason: "the disk fell more than \(endRule.softUnwritten >> 20) MiB behind the network for over "
                    + "\(endRule.behindGrace / 1_000_000_000) s, or \(endRule.hardUnwritten >> 20) MiB at once, and this server sends the whole file in one response (it ignores Range), so the "
                    + "download cannot wait for the disk: it stops rather than hold the file in memory; try again "
                    + "when the disk is less busy"))
    }

    /// A window this sink ended early (the disk behind, a slow first request) keeps what still arrives — URLSession
    /// delivers the chunks it read before the cancel took effect: they continue the file, and dropping them fetched
    /// them again (nginx served 1.009–1.045 times a 1 GiB file that way). Each is checked as every byte is (the
    /// announced length, the overlap) and kept while memory allows (`WindowEndRule.lateDataLimit`). A request closed
    /// from outside (a suspend, a shutdown) or by a failure takes nothing more.
    func keepsData(after end: RequestEnd) -> Bool {
        switch end {
        case .diskBehind, .cutShort: return lateLimit != nil
        default: return false
        }
    }

    func complete(error: (any Error)?) -> RequestEnd {
        if let failure = pipeline.failure { return .failed(failure) }
        hashFellBehind = pipeline.readBackBytes > readBackAtStart
        // Success is judged by our own accounting: every byte the Content-Range announced arrived (and was sent to
        // the disk, which reports its own errors). A transport complaint after that (a Content-Length larger than
        // the body) changes nothing.
        let gotEverything = expectedBodyLength.map { received == $0 } ?? false
        if let error, !gotEverything {
            return .failed(TransportError.failure(error, url: pipeline.url))
        }
        if let expectedBodyLength, received < expectedBodyLength {
            return .failed(
                .connectionFailed(
                    pipeline.url, reason: "the body ended after \(received) of \(expectedBodyLength) bytes"))
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
        let http = response as? HTTPURLResponse
        stored.withLock { $0 = http }
        // A HEAD's answer is its head. A 401 or 407 ends here: on Swift before 6.3.2 a challenge nobody answers never
        // completes (swift-corelibs-foundation #5457), and a resume without its login waited for the stall timeout,
        // then retried, for minutes.
        if let status = http?.statusCode, status == 401 || status == 407 { return .finished }
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
