import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How one HTTP request of a transfer ended.
enum RequestEnd: Sendable {
    /// The response was accepted and its body arrived whole.
    case finished
    /// The resource is a different version than the partial file: start again from byte 0.
    case restartFromZero(reason: String)
    /// 416: nothing to send from the requested offset; the complete length if the server said it.
    case unsatisfiable(completeLength: Int64?)
    /// The request failed or its response was rejected.
    case failed(DownloadError)
    /// Closed from outside: pause, cancellation or shutdown.
    case cancelled
    /// A response streaming the whole file got further ahead of the disk than memory allows, and the server honours
    /// Range: what arrived is kept, the rest is asked for in windows.
    case diskBehind
    /// A run's first request on a new connection would have spun a core for long (`FirstRequestBudget`): what arrived
    /// is kept, and the rest continues on a new connection whose first request is short.
    case cutShort
    /// Ranges of this resource cannot be used (a 206 with a `Content-Encoding`, which URLSession decodes, or a 416
    /// for bytes the resource has): fetch it whole, without `Range`, for the rest of the download.
    case wholeWithoutRanges(reason: String)
    /// A continuation came with another ETag but the same length (and Last-Modified, where sent): backends that
    /// disagree on ETags for the same bytes. The ETag is ignored from now on, and continuations compare the bytes
    /// before the resume point instead.
    case unreliableETag(reason: String)
}

/// Receives one request's events. Every method is called on the session's serial delegate queue, never after the
/// request was closed, so an implementation may keep unsynchronised state that only that queue touches while the
/// request runs. Work a sink hands elsewhere (the transfer's disk queues) is waited for by its owner after the
/// request ends, never on the delegate queue.
protocol TransferSink: AnyObject, Sendable {
    /// Validates the response synchronously (URLSession on Linux ignores the disposition).
    /// - Returns: `nil` to accept the body, or how the request ends (it is then closed and late data is dropped).
    func receive(response: URLResponse) -> RequestEnd?
    /// Consumes a chunk of the body.
    /// - Parameter queued: body bytes URLSession probably holds for this request behind this chunk, not delivered yet
    ///   (`DeliveryBacklog`; 0 when that cannot be told): memory that waits as surely as bytes that wait for the disk.
    /// - Returns: `nil` to continue, or how the request ends.
    func receive(data: Data, queued: Int64) -> RequestEnd?
    /// The request completed (with or without a transport error) and was not closed before.
    /// - Returns: how the request ends.
    func complete(error: (any Error)?) -> RequestEnd
    /// When, if ever, `check(now:)` must run although no event came (a monotonic time in nanoseconds); asked after
    /// each event, it answers a time once.
    func takeCheckTime() -> UInt64?
    /// The time from `takeCheckTime()` has come.
    /// - Returns: `nil` to continue, or how the request ends.
    func check(now: UInt64) -> RequestEnd?
    /// Whether body bytes that still arrive after the request was closed with `end` (URLSession delivers chunks
    /// already read after a cancel) go to the sink rather than being dropped: bytes that reached the process are then
    /// written, and never fetched a second time. Asked, like the rest, on the delegate queue, with an end this sink
    /// gave; a request closed from another thread (a cancel, the stall watchdog) keeps nothing.
    func keepsData(after end: RequestEnd) -> Bool
}

extension TransferSink {
    func takeCheckTime() -> UInt64? { nil }
    func check(now: UInt64) -> RequestEnd? { nil }
    func keepsData(after end: RequestEnd) -> Bool { false }
}

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
        let paced = !isWholeStream || ruleResponse.resumable
        if let failure = pipeline.send(.describe(position.metadata, checkpointEvery: every, paced: paced)) {
            return .failed(failure)
        }
        return nil
    }

    func receive(data chunk: Data, queued: Int64) -> RequestEnd? {
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
        // The body's last bytes are not left to the batch delay: a window's are written at once (the next request
        // does not wait for them), the file's with the fence the transfer waits on next (issue #52).
        let isLast = received == expectedBodyLength
        let wake: DiskWake =
            !isLast ? .batched : position.offset == position.metadata.totalLength ? .withNextFence : .now
        if let failure = pipeline.send(.write(data), wake: wake) { return .failed(failure) }
        // A body that ends with this chunk needs no fence of its own: waiting for the disk fences then (issue #52).
        if halfway == nil, !isLast, let expectedBodyLength, received >= expectedBodyLength / 2 {
            halfway = pipeline.fence()
        }
        let unwritten = pipeline.unwrittenBytes
        peakUnwritten = max(peakUnwritten, unwritten)
        // The clock is read only while a decision needs it, not for every chunk of every request. A whole body's
        // bound counts the bytes URLSession still holds for the delegate queue too: a starved delegate queue piles
        // them up where the disk's count does not see them.
        let waiting = isWholeStream ? unwritten + queued : unwritten
        let verdict = endRule.chunkArrived(received: received, unwritten: waiting, response: ruleResponse) {
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
                    + "\(endRule.behindGrace / 1_000_000_000) s, or \(endRule.hardUnwritten >> 20) MiB at once (or this "
                    + "process had too little CPU to take what arrived), and this server sends the whole file in one "
                    + "response (it ignores Range), so the download cannot wait for the disk: it stops rather than hold "
                    + "the file in memory; try again when the disk or the machine is less busy"))
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

    func receive(data: Data, queued: Int64) -> RequestEnd? { nil }

    func complete(error: (any Error)?) -> RequestEnd {
        if let error {
            return .failed(TransportError.failure(error, url: url))
        }
        return .finished
    }
}

/// The sink of one window of a segment: the response must be a 206 for exactly the bytes asked, of the same version
/// (its validators unchanged, `If-Range` honoured); the body is written at its offsets.
///
/// Anything else ends the segmented download: a 200 (Range ignored, or `If-Range` failed because the resource
/// changed) and a different version restart the file on one connection, so a file is never spliced from two versions.
final class SegmentSink: TransferSink, @unchecked Sendable {
    private let pipeline: DiskPipeline
    private let range: Range<Int64>
    private let known: ResourceMetadata
    private let windowSize: Int64
    private var expectedBodyLength: Int64?
    /// Body bytes received by this request (sent to the disk).
    private(set) var received: Int64 = 0
    /// Opens when the disk has written the first half of this window.
    private(set) var halfway: DiskFence?

    /// Creates the sink of the window `range`.
    /// - Parameters:
    ///   - pipeline: the transfer's disk side.
    ///   - range: the bytes asked for.
    ///   - known: the version being fetched.
    ///   - windowSize: the transfer's window size (for the judge).
    init(pipeline: DiskPipeline, range: Range<Int64>, known: ResourceMetadata, windowSize: Int64) {
        self.pipeline = pipeline
        self.range = range
        self.known = known
        self.windowSize = windowSize
    }

    func receive(response: URLResponse) -> RequestEnd? {
        guard let http = response as? HTTPURLResponse else {
            return .failed(.invalidResponse(pipeline.url, reason: "not an HTTP response"))
        }
        let request = WindowRequest(
            start: range.lowerBound, end: range.upperBound - 1, ranged: true, resumeOffset: range.lowerBound,
            windowSize: windowSize)
        switch ResponseJudge.judge(http.head, request: request, known: known, url: pipeline.url) {
        case .end(let end):
            return end
        case .append(_, let bodyLength), .begin(_, let bodyLength, _):
            // The judge compared the version (`ResourceMetadata.compare`): a segment starts after byte 0.
            expectedBodyLength = bodyLength
            return pipeline.failure.map { .failed($0) }
        case .replace:
            return .restartFromZero(reason: "a segment was answered with the whole file (200)")
        }
    }

    func receive(data: Data, queued: Int64) -> RequestEnd? {
        let count = Int64(data.count)
        if let expectedBodyLength, received + count > expectedBodyLength {
            return .failed(
                .invalidResponse(
                    pipeline.url, reason: "the server sent more than the \(expectedBodyLength) bytes it announced"))
        }
        if let failure = pipeline.send(.writeAt(data, offset: range.lowerBound + received)) { return .failed(failure) }
        received += count
        if halfway == nil, let expectedBodyLength, received >= expectedBodyLength / 2 { halfway = pipeline.fence() }
        return nil
    }

    func complete(error: (any Error)?) -> RequestEnd {
        if let failure = pipeline.failure { return .failed(failure) }
        let gotEverything = expectedBodyLength.map { received == $0 } ?? false
        if let error, !gotEverything {
            return .failed(TransportError.failure(error, url: pipeline.url))
        }
        if !gotEverything {
            return .failed(
                .connectionFailed(pipeline.url, reason: "a segment ended after \(received) of \(range.count) bytes"))
        }
        return .finished
    }
}

/// A sink in front of a request's own: when that one rejects the response with an HTTP error status, this one reads
/// the start of the body (up to `ErrorBody.maximumBytes`, for at most a second) and ends the request with the error
/// and what the server said (`ErrorBody.summary`). Every other event goes to the inner sink unchanged.
///
/// Like every sink it is called on the session's serial delegate queue only, so its state needs no lock.
final class ErrorBodySink: TransferSink, @unchecked Sendable {
    private let inner: any TransferSink
    /// The error the inner sink ended the request with, while its body is read.
    private var pending: DownloadError?
    private var body = Data()
    private var deadline: UInt64?

    init(_ inner: any TransferSink) {
        self.inner = inner
    }

    func receive(response: URLResponse) -> RequestEnd? {
        let end = inner.receive(response: response)
        guard case .failed(let error) = end, error == .httpStatus, (error.statusCode ?? 0) >= 400,
            (response as? HTTPURLResponse)?.expectedContentLength != 0
        else { return end }
        pending = error
        deadline = DispatchTime.now().uptimeNanoseconds + 1_000_000_000
        return nil
    }

    func receive(data: Data, queued: Int64) -> RequestEnd? {
        guard pending != nil else { return inner.receive(data: data, queued: queued) }
        body.append(data.prefix(ErrorBody.maximumBytes - body.count))
        return body.count >= ErrorBody.maximumBytes ? failure() : nil
    }

    func complete(error: (any Error)?) -> RequestEnd {
        pending != nil ? failure() : inner.complete(error: error)
    }

    func takeCheckTime() -> UInt64? {
        guard pending != nil else { return inner.takeCheckTime() }
        defer { deadline = nil }
        return deadline
    }

    func check(now: UInt64) -> RequestEnd? {
        pending != nil ? failure() : inner.check(now: now)
    }

    func keepsData(after end: RequestEnd) -> Bool {
        pending != nil ? false : inner.keepsData(after: end)
    }

    /// The pending error with what the body said.
    private func failure() -> RequestEnd {
        guard let pending else { return .cancelled }
        guard let summary = ErrorBody.summary(of: body) else { return .failed(pending) }
        return .failed(pending.adding("it said: “\(summary)”"))
    }
}

/// When a run's first request on a new connection is cut short: a value whose one event is a body chunk's arrival,
/// tested without sockets.
///
/// On Linux, FoundationNetworking watches a new connection for writability for the whole of its first request (the
/// connect step asks for it and nothing takes it back), and a socket is always writable: that request spins a core
/// until it ends (the documentation's platform notes). A request that reuses the connection does not. So the first
/// request asks for a whole window — a small or mid-size file is one request, one round trip, as with curl — and this
/// budget ends it early when, `measuring` after its first body byte, the rest of it would still take longer than
/// `remaining` at the rate seen: the rest continues on a new connection whose first request is short
/// (`Transfer.Configuration.firstWindowSize`), and a slow transfer spins for a fraction of a second, not for all of
/// it. A request that ends within about a second spins while it lasts.
package struct FirstRequestBudget: Sendable, Equatable {
    /// How long the body is watched before its rate is judged, in nanoseconds. Default a quarter of a second.
    var measuring: UInt64 = 250_000_000
    /// The longest the rest of the request may take at the rate seen for it to go on, in nanoseconds. Default 1 s.
    var remaining: UInt64 = 1_000_000_000
    /// When the first body bytes arrived, and how many had arrived by then.
    private var firstTime: UInt64?
    private var firstReceived: Int64 = 0
    /// Whether the request was judged (it then goes on to its end, or was cut).
    private(set) var isDecided = false

    /// When the request is judged even if no more bytes come (a body that pauses): `measuring` after its first body
    /// bytes; `nil` before they came or once judged.
    var judgementTime: UInt64? {
        guard !isDecided, let firstTime else { return nil }
        return firstTime + measuring
    }

    /// The defaults.
    init() {}

    /// A budget with other limits (tests).
    /// - Parameters:
    ///   - measuring: nanoseconds of body before the rate is judged.
    ///   - remaining: the longest the rest may take, in nanoseconds.
    init(measuring: UInt64, remaining: UInt64) {
        self.measuring = measuring
        self.remaining = remaining
    }

    /// Body bytes arrived.
    /// - Parameters:
    ///   - received: body bytes of this request so far, this chunk's included.
    ///   - left: body bytes still to come.
    ///   - now: a monotonic time in nanoseconds.
    /// - Returns: whether to end the request here.
    mutating func bodyArrived(received: Int64, left: Int64, now: UInt64) -> Bool {
        guard !isDecided else { return false }
        guard left > 0 else {
            isDecided = true
            return false
        }
        guard let firstTime else {
            (firstTime, firstReceived) = (now, received)
            return false
        }
        guard now > firstTime, now - firstTime >= measuring else { return false }
        isDecided = true
        let rate = Double(received - firstReceived) / Double(now - firstTime)  // bytes per nanosecond
        guard rate > 0 else { return true }
        return Double(left) / rate > Double(remaining)
    }
}
