import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a finished transfer produced.
struct TransferResult: Sendable {
    /// The verified file in the completed area.
    let fileURL: URL
    /// Its MD5 (`nil` when hashing was turned off).
    let md5: MD5Digest?
    /// Its length.
    let length: Int64
    /// Bytes that were already on disk when this run started (resumed, not downloaded again).
    let resumedBytes: Int64
    /// Bytes received from the network by this run.
    let receivedBytes: Int64
}

/// Takes one URL to one complete, verified file, surviving interruptions without ever producing a wrong byte.
///
/// The flow is one way: probe (HEAD) → restore the partial file and its saved hash → fetch the rest in sequential
/// Range windows (each validated, written and hashed as it arrives) → verify the MD5 → move into the completed area.
/// A run that stops early (error, cancellation) leaves the partial file and its saved state consistent, so the next
/// run resumes by Range. Scheduling, retries and persistence of receipts belong to the manager.
final class Transfer: Sendable {
    /// Settings of the engine.
    struct Configuration: Sendable {
        /// Bytes per Range request: memory stays bounded because the next window starts only after the writer has
        /// drained this one.
        var windowSize: Int64 = 16 << 20
        /// How often a file changed mid-download may restart it before giving up.
        var maximumRestarts = 3
    }

    let url: URL
    let options: DownloadOptions
    let directory: DownloadDirectory
    let bridge: SessionBridge
    let configuration: Configuration
    private let progress: @Sendable (_ written: Int64, _ total: Int64?) -> Void

    /// Creates a transfer; nothing happens until `run()`.
    /// - Parameters:
    ///   - url: what to download.
    ///   - options: headers, expected MD5, naming.
    ///   - directory: where partial and completed files live.
    ///   - bridge: the manager's session.
    ///   - configuration: engine settings.
    ///   - progress: called on the delegate queue after every chunk with the bytes on disk and the total if known.
    init(
        url: URL, options: DownloadOptions, directory: DownloadDirectory, bridge: SessionBridge,
        configuration: Configuration = Configuration(),
        progress: @escaping @Sendable (_ written: Int64, _ total: Int64?) -> Void = { _, _ in }
    ) {
        self.url = url
        self.options = options
        self.directory = directory
        self.bridge = bridge
        self.configuration = configuration
        self.progress = progress
    }

    /// Downloads, verifies and moves the file into the completed area.
    /// - Returns: the completed file and its digest.
    /// - Throws: `DownloadError`; `.cancelled` when the calling task was cancelled (the partial file is kept).
    func run() async throws(DownloadError) -> TransferResult {
        try url.validateForDownload()
        var expected: MD5Digest?
        if let text = options.expectedMD5 {
            guard let digest = MD5Digest(hexString: text) else {
                throw .invalidURL(url.absoluteString, reason: "the expected MD5 \"\(text)\" is not 32 hex digits")
            }
            expected = digest
        }
        try directory.createAreas()
        let hashing = options.computesMD5 || expected != nil
        let job = TransferJob(
            url: url, partialFile: directory.partialFile(for: url), stateFile: directory.stateFile(for: url),
            hashing: hashing)
        defer {
            job.writer?.close()
            job.writer = nil
        }

        let probe = try await self.probe()
        try restore(job, probe: probe)
        let resumedBytes = job.offset
        var restarts = 0
        while true {
            try await fetchRemaining(job, restarts: &restarts)
            job.writer?.close()
            job.writer = nil
            let digest = job.hashing ? job.md5.finalize() : nil
            if let total = job.totalLength, total != job.offset {
                throw .invalidResponse(url, reason: "the file has \(job.offset) bytes, the server announced \(total)")
            }
            if let digest, let want = expected ?? job.announcedMD5, want != digest {
                if !job.restartedAfterMismatch {
                    job.restartedAfterMismatch = true
                    try job.truncate()
                    try job.checkpoint()
                    continue
                }
                try? FileManager.default.removeItem(at: job.partialFile)
                try? FileManager.default.removeItem(at: job.stateFile)
                throw .checksumMismatch(url, expected: want.hexString, actual: digest.hexString)
            }
            let fileURL = try complete(job)
            return TransferResult(
                fileURL: fileURL, md5: digest, length: job.offset, resumedBytes: resumedBytes,
                receivedBytes: job.receivedThisRun)
        }
    }

    // MARK: - Steps

    /// What a HEAD request told about the resource.
    struct Probe {
        var totalLength: Int64?
        var acceptsRanges: Bool
        var validators: Validators
        var suggestedFilename: String?
        var announcedMD5: MD5Digest?
    }

    /// Asks for the headers. A server that refuses HEAD (400, 403, 405, 501) is not an error: the first GET tells
    /// the same.
    /// - Throws: the status of other failures (404 fails at once), connection errors, `.cancelled`.
    private func probe() async throws(DownloadError) -> Probe? {
        var request = makeRequest()
        request.httpMethod = "HEAD"
        let sink = ProbeSink(url: url)
        switch await bridge.perform(request, sink: sink) {
        case .finished:
            guard let response = sink.response else { return nil }
            switch response.statusCode {
            case 200..<300:
                let length = response.value(forHTTPHeaderField: "Content-Length").flatMap { Int64($0) }
                return Probe(
                    totalLength: response.isContentEncoded ? nil : length,
                    acceptsRanges: response.value(forHTTPHeaderField: "Accept-Ranges")?.lowercased() != "none",
                    validators: response.validators, suggestedFilename: response.dispositionFilename,
                    announcedMD5: response.announcedMD5)
            case 400, 403, 405, 501:
                return nil
            default:
                throw .httpStatus(response.statusCode, url: url, retryAfter: response.retryAfter)
            }
        case .failed(let error):
            throw error
        case .cancelled:
            throw .cancelled(url)
        case .restartFromZero, .unsatisfiable:
            return nil
        }
    }

    /// Picks up the partial file: with a saved state of the same version, continue its hash (re-hashing only the
    /// bytes written after the last checkpoint); otherwise start from an empty file.
    private func restore(_ job: TransferJob, probe: Probe?) throws(DownloadError) {
        let length = FileManager.default.sizeOfItem(at: job.partialFile)
        if let saved = PartialState.load(from: job.stateFile, for: url), let length {
            var sameVersion = true
            if let probe {
                if probe.validators.differs(from: saved.validators) { sameVersion = false }
                if let now = probe.totalLength, let before = saved.totalLength, now != before { sameVersion = false }
            }
            if sameVersion {
                job.validators = saved.validators.isEmpty ? (probe?.validators ?? saved.validators) : saved.validators
                job.totalLength = saved.totalLength ?? probe?.totalLength
                job.rangesSupported = saved.rangesSupported && (probe?.acceptsRanges ?? true)
                job.suggestedFilename = saved.suggestedFilename ?? probe?.suggestedFilename
                job.announcedMD5 = saved.announcedMD5.flatMap(MD5Digest.init(hexString:)) ?? probe?.announcedMD5
                job.restartedAfterMismatch = saved.restartedAfterMismatch
                if let total = job.totalLength, length > total {
                    try startOver(job, probe: probe)
                    return
                }
                if !job.hashing {
                    job.md5 = MD5()
                } else if saved.hashedLength <= length {
                    job.md5 = saved.md5
                    try rehash(job, from: saved.hashedLength, to: length)
                } else {
                    job.md5 = MD5()
                    try rehash(job, from: 0, to: length)
                }
                job.offset = length
                try job.checkpoint()
                return
            }
        }
        try startOver(job, probe: probe)
    }

    private func startOver(_ job: TransferJob, probe: Probe?) throws(DownloadError) {
        try job.truncate()
        job.validators = probe?.validators ?? Validators()
        job.totalLength = probe?.totalLength
        job.rangesSupported = probe?.acceptsRanges ?? true
        job.suggestedFilename = probe?.suggestedFilename
        job.announcedMD5 = probe?.announcedMD5
        try job.checkpoint()
    }

    /// Requests windows until the file is whole.
    private func fetchRemaining(_ job: TransferJob, restarts: inout Int) async throws(DownloadError) {
        while true {
            if Task.isCancelled {
                try? job.checkpoint()
                throw .cancelled(url)
            }
            if let total = job.totalLength {
                if job.offset == total { return }
                if job.offset > total { try restart(job, reason: "the partial file is longer than the resource", &restarts) }
            }
            if !job.rangesSupported && job.offset > 0 {
                // No way to ask for the rest: the next request streams the whole resource from byte 0.
                try job.truncate()
                try job.checkpoint()
            }

            var request = makeRequest()
            let start = job.offset
            var end: Int64?
            if job.rangesSupported {
                let last = start + configuration.windowSize - 1
                end = job.totalLength.map { min(last, $0 - 1) } ?? last
                request.setValue("bytes=\(start)-\(end!)", forHTTPHeaderField: "Range")
                if start > 0, let ifRange = job.validators.ifRange {
                    request.setValue(ifRange, forHTTPHeaderField: "If-Range")
                }
            }
            let sink = WindowSink(
                job: job, start: start, end: end, ranged: end != nil, checkpointInterval: configuration.windowSize,
                progress: progress)
            let outcome = await bridge.perform(request, sink: sink)
            // The request is over and its sink has drained the disk queue; synchronising with that queue here makes
            // the hand-off of the job's state to this task explicit (ThreadSanitizer does not always see it through
            // the continuation). The queue is idle, so this returns at once.
            job.disk.sync {}
            switch outcome {
            case .finished:
                try job.checkpoint()
                if sink.isWholeStream { return }
                if job.totalLength == nil, let end, sink.received < end - start + 1 {
                    job.totalLength = job.offset  // a short window of unknown total: that was the end
                    return
                }
            case .restartFromZero(let reason):
                try restart(job, reason: reason, &restarts)
            case .unsatisfiable(let completeLength):
                if let completeLength, completeLength == job.offset {
                    job.totalLength = completeLength
                    return
                }
                try restart(job, reason: "the server cannot serve bytes from \(job.offset)", &restarts)
                job.totalLength = completeLength
            case .failed(let error):
                try? job.checkpoint()
                throw error
            case .cancelled:
                try? job.checkpoint()
                throw .cancelled(url)
            }
        }
    }

    /// Empties the partial file to start the current version from byte 0, giving up after too many restarts.
    private func restart(_ job: TransferJob, reason: String, _ restarts: inout Int) throws(DownloadError) {
        restarts += 1
        guard restarts <= configuration.maximumRestarts else {
            try? FileManager.default.removeItem(at: job.partialFile)
            try? FileManager.default.removeItem(at: job.stateFile)
            throw .fileChanged(url, reason: "\(reason); restarted \(configuration.maximumRestarts) times")
        }
        try job.truncate()
        job.validators = Validators()
        job.totalLength = nil
        job.announcedMD5 = nil
        job.rangesSupported = true
        try job.checkpoint()
    }

    /// Moves the verified partial file into the completed area and forgets its saved state.
    private func complete(_ job: TransferJob) throws(DownloadError) -> URL {
        let name = DownloadDirectory.finalName(naming: options.naming, url: url, suggested: job.suggestedFilename)
        let destination = directory.destination(for: name, naming: options.naming)
        let manager = FileManager.default
        do {
            if manager.fileExists(atPath: destination.path) { try manager.removeItem(at: destination) }
            try manager.moveItem(at: job.partialFile, to: destination)
        } catch {
            throw .fileSystem(
                url, reason: "cannot move the verified file to \(destination.path): \(error.localizedDescription)")
        }
        try? manager.removeItem(at: job.stateFile)
        return destination
    }

    // MARK: - Helpers

    /// A GET for the URL with the user's headers and `Accept-Encoding: identity` (a compressed body would break
    /// byte offsets).
    private func makeRequest() -> URLRequest {
        var request = URLRequest(url: url)
        request.cachePolicy = .reloadIgnoringLocalCacheData
        for (name, value) in options.headers { request.setValue(value, forHTTPHeaderField: name) }
        request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        return request
    }

    /// Feeds bytes `from..<to` of the partial file into the hash, 1 MiB at a time.
    private func rehash(_ job: TransferJob, from: Int64, to: Int64) throws(DownloadError) {
        guard to > from else { return }
        do {
            let handle = try FileHandle(forReadingFrom: job.partialFile)
            defer { try? handle.close() }
            try handle.seek(toOffset: UInt64(from))
            var position = from
            while position < to {
                let count = Int(min(1 << 20, to - position))
                guard let data = try handle.read(upToCount: count), !data.isEmpty else { break }
                job.md5.update(data: data)
                position += Int64(data.count)
            }
            guard position == to else {
                throw DownloadError.fileSystem(url, reason: "the partial file ended at \(position) while re-hashing")
            }
        } catch let error as DownloadError {
            throw error
        } catch {
            throw .fileSystem(url, reason: "cannot read the partial file: \(error.localizedDescription)")
        }
    }
}
