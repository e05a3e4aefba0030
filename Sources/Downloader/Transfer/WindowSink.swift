import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The sink of one GET: validates the response against the request (status, `Content-Range`, validators,
/// encoding), then hands the body to the job's disk queue, counting bytes itself.
///
/// It runs on the delegate queue, on the network side of the job (see `TransferJob`): it reads and updates the job's
/// metadata, never the disk-side state, so the disk may still be writing the previous window meanwhile.
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
    private let progress: @Sendable (Int64, Int64?) -> Void

    private var expectedBodyLength: Int64?
    /// Body bytes received by this request (handed to the disk queue).
    private(set) var received: Int64 = 0
    /// Whether this response streams the whole resource (a 200).
    private(set) var isWholeStream = false
    /// Opens when the disk has written and hashed the first half of this response's body.
    private(set) var halfway: DiskFence?
    /// Metadata snapshot and progress callback for the disk queue, fixed once the response is accepted.
    private var diskMetadata = TransferJob.Metadata()
    private var diskProgress: @Sendable (Int64) -> Void = { _ in }

    init(
        job: TransferJob, start: Int64, end: Int64?, ranged: Bool, overlap: Data = Data(), checkpointInterval: Int64,
        progress: @escaping @Sendable (Int64, Int64?) -> Void
    ) {
        self.job = job
        self.start = start
        self.end = end
        self.ranged = ranged
        self.overlap = overlap
        self.checkpointInterval = checkpointInterval
        self.progress = progress
    }

    /// A file up to this size that one window holds gets no saved state until it completes: thousands of small
    /// files then cost no state files at all, and a crash costs at most this much to fetch again.
    static let uncheckpointedSize: Int64 = 1 << 20

    /// Whether a file of this length gets no saved state (see `uncheckpointedSize`): the short first request of a new
    /// connection does not count as a window.
    static func isSmall(_ length: Int64, windowSize: Int64) -> Bool {
        length <= min(uncheckpointedSize, windowSize)
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
                return .failed(
                    .invalidResponse(url, reason: "asked for bytes from \(start), got Content-Range \(header)"))
            }
            guard !encoded else {
                let encoding = http.value(forHTTPHeaderField: "Content-Encoding") ?? ""
                return .failed(
                    .invalidResponse(url, reason: "a 206 with Content-Encoding \(encoding) cannot be spliced"))
            }
            if resumeOffset > 0 {
                if validators.differs(from: job.metadata.validators) {
                    return .restartFromZero(reason: "the resource changed (validators differ)")
                }
                if let total = job.metadata.totalLength, let complete = contentRange.completeLength, complete != total {
                    return .restartFromZero(reason: "the resource's length changed from \(total) to \(complete)")
                }
                job.metadata.totalLength = job.metadata.totalLength ?? contentRange.completeLength
                if job.metadata.validators.isEmpty { job.metadata.validators = validators }
                // Repr-Digest and Digest describe the whole file even on a part.
                if job.metadata.announced.isEmpty {
                    job.metadata.announced = http.announcedChecksums(bodyIsWholeFile: false)
                }
            } else {
                // Byte 0: nothing to splice onto, so this response defines the version. A fresh download starts
                // here without a HEAD, so it also reads the name and the announced checksums (a body's digest
                // only when the body is the whole file), and chooses what to hash with.
                if validators.differs(from: job.metadata.validators) { job.metadata.announced = [] }
                job.metadata.validators = validators
                job.metadata.totalLength = contentRange.completeLength
                job.metadata.suggestedFilename = http.dispositionFilename ?? job.metadata.suggestedFilename
                let wholeFile = contentRange.completeLength == Int64(range.count)
                let announced = http.announcedChecksums(bodyIsWholeFile: wholeFile)
                if !announced.isEmpty { job.metadata.announced = announced }
                // Save the version now (a crash mid-window then keeps its bytes), except for a small file: it is
                // verified and moved right after its last byte.
                let checkpoints = !Self.isSmall(contentRange.completeLength ?? .max, windowSize: checkpointInterval)
                let chosen = job.metadata.announced
                let failure = job.runNow { (job: TransferJob) throws(DownloadError) in
                    job.chooseHash(announced: chosen)
                    if checkpoints { try job.checkpoint() }
                }
                if let failure { return .failed(failure) }
            }
            expectedBodyLength = Int64(range.count)
        case 200:
            // A whole body: either the first request, a server that ignores Range, or an If-Range that failed
            // because the resource changed. In every case the body is the whole current version, from byte 0.
            if ranged && !validators.differs(from: job.metadata.validators) && (resumeOffset > 0 || end != nil) {
                job.metadata.rangesSupported = false  // same version, Range ignored: stream from now on
            }
            isWholeStream = true
            job.metadata.validators = validators
            let length = http.expectedContentLength
            job.metadata.totalLength = encoded || length < 0 ? nil : length
            expectedBodyLength = job.metadata.totalLength
            job.metadata.suggestedFilename = http.dispositionFilename ?? job.metadata.suggestedFilename
            job.metadata.announced = http.announcedChecksums(bodyIsWholeFile: true)
            if encoded { job.metadata.rangesSupported = false }
            // Waits for the disk to finish what it has (an older version's bytes, rarely), then starts over.
            let smallFile = job.metadata.totalLength.map { $0 <= Self.uncheckpointedSize } ?? false
            let announced = job.metadata.announced
            let failure = job.runNow { (job: TransferJob) throws(DownloadError) in
                try job.truncate()
                job.chooseHash(announced: announced)
                if !smallFile { try job.checkpoint() }
            }
            if let failure { return .failed(failure) }
        case 416:
            let complete = http.value(forHTTPHeaderField: "Content-Range").flatMap(ContentRange.init)?.completeLength
            return .unsatisfiable(completeLength: complete)
        default:
            return .failed(.httpStatus(http.statusCode, url: url, retryAfter: http.retryAfter))
        }
        if let failure = job.diskError.withLock({ $0 }) { return .failed(failure) }
        job.keepsRecentBytes = !job.metadata.validators.hasStrongETag
        if isWholeStream { compared = overlap.count }  // a whole body starts the file again: nothing to compare
        job.writeLater { (job: TransferJob) throws(DownloadError) in try job.openWriter() }
        diskMetadata = job.metadata
        let total = job.metadata.totalLength
        let progress = self.progress
        diskProgress = { written in progress(written, total) }
        return nil
    }

    func receive(data chunk: Data) -> RequestEnd? {
        if let failure = job.diskError.withLock({ $0 }) { return .failed(failure) }
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
        if halfway == nil, let expectedBodyLength, received >= expectedBodyLength / 2 { halfway = job.fence() }
        job.submit(
            data, metadata: diskMetadata, checkpointInterval: isWholeStream ? checkpointInterval : nil,
            progress: diskProgress)
        return nil
    }

    func complete(error: (any Error)?) -> RequestEnd {
        if let failure = job.diskError.withLock({ $0 }) { return .failed(failure) }
        // Success is judged by our own accounting: every byte the Content-Range announced arrived (and was handed
        // to the disk, which reports its own errors). A transport complaint after that (a Content-Length larger
        // than the body) changes nothing.
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
        if isWholeStream && job.metadata.totalLength == nil { job.metadata.totalLength = job.networkOffset }
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
            return .failed(
                .connectionFailed(
                    url, reason: TransportError.describe(error), underlying: SavedError(description: "\(error)")))
        }
        return .finished
    }
}
