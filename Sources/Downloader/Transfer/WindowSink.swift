import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The sink of one GET: carries out `ResponseJudge`'s verdict on the response, then hands the body to the job's disk
/// queue, counting bytes itself.
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

    func receive(response: URLResponse) -> RequestEnd? {
        guard let http = response as? HTTPURLResponse else {
            return .failed(.invalidResponse(job.url, reason: "not an HTTP response"))
        }
        let request = WindowRequest(
            start: start, end: end, ranged: ranged, resumeOffset: resumeOffset, windowSize: checkpointInterval)
        let failure: DownloadError?
        switch ResponseJudge.judge(http.head, request: request, known: job.metadata, url: job.url) {
        case .end(let end):
            return end
        case .append(let metadata, let bodyLength):
            job.metadata = metadata
            expectedBodyLength = bodyLength
            failure = nil
        case .begin(let metadata, let bodyLength, let checkpoint):
            job.metadata = metadata
            expectedBodyLength = bodyLength
            failure = job.runNow { (job: TransferJob) throws(DownloadError) in
                job.chooseHash(announced: metadata.announced)
                if checkpoint { try job.checkpoint() }
            }
        case .replace(let metadata, let bodyLength, let checkpoint):
            // Waits for the disk to finish what it has (an older version's bytes, rarely), then starts over.
            job.metadata = metadata
            expectedBodyLength = bodyLength
            isWholeStream = true
            failure = job.runNow { (job: TransferJob) throws(DownloadError) in
                try job.truncate()
                job.chooseHash(announced: metadata.announced)
                if checkpoint { try job.checkpoint() }
            }
        }
        if let failure { return .failed(failure) }
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
