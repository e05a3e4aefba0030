import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The sink of one GET: validates the response against the request (status, `Content-Range`, validators,
/// encoding), then writes and hashes the body, counting bytes itself.
final class WindowSink: TransferSink, @unchecked Sendable {
    private let job: TransferJob
    /// The first byte asked for.
    private let start: Int64
    /// The last byte asked for, when the request had a closed range.
    private let end: Int64?
    /// Whether the request carried a `Range` header.
    private let ranged: Bool
    private let checkpointInterval: Int64
    private let progress: @Sendable (Int64, Int64?) -> Void

    private var expectedBodyLength: Int64?
    /// Body bytes received by this request (written once drained).
    private(set) var received: Int64 = 0
    /// Chunks handed to the disk queue and not yet taken, and the bytes it is coalescing.
    private let diskState = Locked((pendingChunks: 0, buffer: Data()))
    /// Whether this response streams the whole resource (a 200).
    private(set) var isWholeStream = false

    init(
        job: TransferJob, start: Int64, end: Int64?, ranged: Bool, checkpointInterval: Int64,
        progress: @escaping @Sendable (Int64, Int64?) -> Void
    ) {
        self.job = job
        self.start = start
        self.end = end
        self.ranged = ranged
        self.checkpointInterval = checkpointInterval
        self.progress = progress
    }

    func receive(response: URLResponse) -> RequestEnd? {
        let url = job.url
        guard let http = response as? HTTPURLResponse else {
            return .failed(.invalidResponse(url, reason: "not an HTTP response"))
        }
        let validators = http.validators
        let encoded = http.isContentEncoded
        switch http.statusCode {
        case 206:
            guard ranged, let header = http.value(forHTTPHeaderField: "Content-Range"),
                let contentRange = ContentRange(header), let range = contentRange.range
            else {
                return .failed(.invalidResponse(url, reason: "206 without a usable Content-Range"))
            }
            guard range.lowerBound == start, end.map({ range.upperBound <= $0 }) ?? true else {
                return .failed(.invalidResponse(url, reason: "asked for bytes from \(start), got Content-Range \(header)"))
            }
            guard !encoded else {
                let encoding = http.value(forHTTPHeaderField: "Content-Encoding") ?? ""
                return .failed(.invalidResponse(url, reason: "a 206 with Content-Encoding \(encoding) cannot be spliced"))
            }
            if start > 0 {
                if validators.differs(from: job.validators) {
                    return .restartFromZero(reason: "the resource changed (validators differ)")
                }
                if let total = job.totalLength, let complete = contentRange.completeLength, complete != total {
                    return .restartFromZero(reason: "the resource's length changed from \(total) to \(complete)")
                }
                job.totalLength = job.totalLength ?? contentRange.completeLength
                if job.validators.isEmpty { job.validators = validators }
            } else {
                // Byte 0: nothing to splice onto, so this response defines the version.
                if validators.differs(from: job.validators) { job.announcedMD5 = nil }
                job.validators = validators
                job.totalLength = contentRange.completeLength
                if let failure = onDisk({ (job: TransferJob) throws(DownloadError) in try job.checkpoint() }) { return .failed(failure) }
            }
            expectedBodyLength = Int64(range.count)
        case 200:
            // A whole body: either the first request, a server that ignores Range, or an If-Range that failed
            // because the resource changed. In every case the body is the whole current version, from byte 0.
            if ranged && !validators.differs(from: job.validators) && (start > 0 || end != nil) {
                job.rangesSupported = false  // same version, Range ignored: stream from now on
            }
            isWholeStream = true
            if let failure = onDisk({ (job: TransferJob) throws(DownloadError) in try job.truncate() }) { return .failed(failure) }
            job.validators = validators
            let length = http.expectedContentLength
            job.totalLength = encoded || length < 0 ? nil : length
            expectedBodyLength = job.totalLength
            job.suggestedFilename = http.dispositionFilename ?? job.suggestedFilename
            job.announcedMD5 = http.announcedMD5
            if encoded { job.rangesSupported = false }
            if let failure = onDisk({ (job: TransferJob) throws(DownloadError) in try job.checkpoint() }) { return .failed(failure) }
        case 416:
            let complete = http.value(forHTTPHeaderField: "Content-Range").flatMap(ContentRange.init)?.completeLength
            return .unsatisfiable(completeLength: complete)
        default:
            return .failed(.httpStatus(http.statusCode, url: url, retryAfter: http.retryAfter))
        }
        if let failure = onDisk({ (job: TransferJob) throws(DownloadError) in try job.openWriter() }) { return .failed(failure) }
        return nil
    }

    /// Runs file work on the disk queue (which owns the file while the request runs) and waits for it.
    private func onDisk(_ work: @escaping @Sendable (TransferJob) throws(DownloadError) -> Void) -> DownloadError? {
        let job = self.job
        return job.disk.sync { () -> DownloadError? in
            do throws(DownloadError) {
                try work(job)
                return nil
            } catch {
                return error
            }
        }
    }

    func receive(data: Data) -> RequestEnd? {
        if let failure = job.diskError.withLock({ $0 }) { return .failed(failure) }
        let count = Int64(data.count)
        if let expectedBodyLength, received + count > expectedBodyLength {
            return .failed(.invalidResponse(job.url, reason: "the server sent more than the \(expectedBodyLength) bytes it announced"))
        }
        received += count
        hand(data)
        return nil
    }

    /// The disk queue writes when it holds this much, or sooner when no further chunk is waiting.
    static let batchSize = 1 << 20

    /// Passes a chunk to the disk queue. The disk queue coalesces: at full speed it writes and hashes 1 MiB at a
    /// time; when the flow slows or stops (a stall, a pause) it writes at once, so nothing received waits in memory
    /// for more data — a `kill -9` loses only what is in flight.
    private func hand(_ data: Data) {
        let job = self.job
        let state = diskState
        let wholeStream = isWholeStream
        let interval = checkpointInterval
        let progress = self.progress
        state.withLock { $0.pendingChunks += 1 }
        job.disk.async {
            let flush = state.withLock { disk -> Data? in
                disk.pendingChunks -= 1
                disk.buffer.append(data)
                guard disk.buffer.count >= Self.batchSize || disk.pendingChunks == 0 else { return nil }
                defer { disk.buffer = Data(capacity: Self.batchSize) }
                return disk.buffer
            }
            guard let bytes = flush, job.diskError.withLock({ $0 == nil }) else { return }
            do throws(DownloadError) {
                let failure = bytes.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) -> DownloadError? in
                    do throws(DownloadError) {
                        try job.append(buffer)
                        return nil
                    } catch {
                        return error
                    }
                }
                if let failure { throw failure }
                if wholeStream && job.offset - job.checkpointOffset >= interval { try job.checkpoint() }
            } catch {
                job.diskError.withLock { if $0 == nil { $0 = error } }
                return
            }
            progress(job.offset, job.totalLength)
        }
    }

    /// Waits until the disk queue has written and hashed everything handed to it.
    /// - Returns: the disk error, if writing failed.
    @discardableResult
    func drain() -> DownloadError? {
        job.disk.sync {}
        return job.diskError.withLock { $0 }
    }

    func finish() {
        drain()
    }

    func complete(error: (any Error)?) -> RequestEnd {
        if let failure = drain() { return .failed(failure) }
        // Success is judged by our own accounting: every byte the Content-Range announced arrived, written and
        // hashed. A transport complaint after that (a Content-Length larger than the body) changes nothing.
        let gotEverything = expectedBodyLength.map { received == $0 } ?? false
        if let error, !gotEverything {
            return .failed(
                .connectionFailed(
                    job.url, reason: TransportError.describe(error), underlying: SavedError(description: "\(error)")))
        }
        if let expectedBodyLength, received < expectedBodyLength {
            return .failed(
                .connectionFailed(job.url, reason: "the body ended after \(received) of \(expectedBodyLength) bytes"))
        }
        if isWholeStream && job.totalLength == nil { job.totalLength = job.offset }
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

    func finish() {}

    func complete(error: (any Error)?) -> RequestEnd {
        if let error {
            return .failed(
                .connectionFailed(url, reason: TransportError.describe(error), underlying: SavedError(description: "\(error)")))
        }
        return .finished
    }
}
