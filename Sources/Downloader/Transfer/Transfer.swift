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
    /// The server's raw `Content-Disposition` name, if it sent one.
    let suggestedFilename: String?

    /// The file's checksum, when it was hashed.
    var checksum: Checksum? { md5.flatMap { Checksum(algorithm: .md5, digest: $0.bytes) } }
}

/// Takes one URL to one complete, verified file, surviving interruptions without ever producing a wrong byte.
///
/// The flow is one way: probe (HEAD, only when resuming) → restore the partial file and its saved hash → fetch the
/// rest in sequential Range windows (each validated, written and hashed as it arrives) → verify the MD5 → move into
/// the completed area.
/// A run that stops early (error, cancellation) leaves the partial file and its saved state consistent, so the next
/// run resumes by Range. Scheduling, retries and persistence of receipts belong to the manager.
final class Transfer: Sendable {
    /// Settings of the engine.
    struct Configuration: Sendable {
        /// Bytes per Range request: memory stays bounded because the next window starts only once the disk is past
        /// the middle of this one (at most one and a half windows wait in memory).
        var windowSize: Int64 = 8 << 20
        /// How often a file changed mid-download may restart it before giving up.
        var maximumRestarts = 3
    }

    let url: URL
    let options: DownloadOptions
    let directory: DownloadDirectory
    let bridge: SessionBridge
    let configuration: Configuration
    /// A completed file that the verified file replaces (instead of taking a name of its own).
    let replacing: URL?
    /// Told where the verified file goes just before it moves (the manager records it, so that a crash during the
    /// move is recognised): the path, the length, the digest and the server's suggested name.
    let willPlace: (@Sendable (URL, Int64, MD5Digest?, String?) -> Void)?
    private let progress: @Sendable (_ written: Int64, _ total: Int64?) -> Void

    /// Creates a transfer; nothing happens until `run()`.
    /// - Parameters:
    ///   - url: what to download.
    ///   - options: headers, expected MD5, naming.
    ///   - directory: where partial and completed files live.
    ///   - bridge: the manager's session.
    ///   - configuration: engine settings.
    ///   - replacing: a completed file the verified file replaces, if any.
    ///   - willPlace: told where the verified file goes just before it moves.
    ///   - progress: called on the delegate queue after every chunk with the bytes on disk and the total if known.
    init(
        url: URL, options: DownloadOptions, directory: DownloadDirectory, bridge: SessionBridge,
        configuration: Configuration = Configuration(), replacing: URL? = nil,
        willPlace: (@Sendable (URL, Int64, MD5Digest?, String?) -> Void)? = nil,
        progress: @escaping @Sendable (_ written: Int64, _ total: Int64?) -> Void = { _, _ in }
    ) {
        self.url = url
        self.options = options
        self.directory = directory
        self.bridge = bridge
        self.configuration = configuration
        self.replacing = replacing
        self.willPlace = willPlace
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

        // A HEAD only when there is a partial file to resume: it tells whether the saved bytes are still the
        // current version before they are re-hashed. A fresh download learns the same from its first GET.
        let probe = PartialState.exists(at: job.stateFile) ? try await self.probe() : nil
        try restore(job, probe: probe)
        let resumedBytes = job.offset
        var restarts = 0
        while true {
            do {
                try await fetchRemaining(job, restarts: &restarts)
            } catch {
                // The disk may still be writing the last window: let it finish before the file is closed.
                await job.drained()
                throw error
            }
            if let failure = await job.drained() { throw failure }
            job.writer?.close()
            job.writer = nil
            let digest = job.hashing ? job.md5.finalize() : nil
            if let total = job.metadata.totalLength, total != job.offset {
                throw .invalidResponse(url, reason: "the file has \(job.offset) bytes, the server announced \(total)")
            }
            if let digest, let want = expected ?? job.metadata.announcedMD5, want != digest {
                if !job.metadata.restartedAfterMismatch {
                    job.metadata.restartedAfterMismatch = true
                    try job.truncate()
                    try job.checkpoint()
                    continue
                }
                job.discardFiles()
                throw .checksumMismatch(url, expected: want.hexString, actual: digest.hexString)
            }
            let fileURL: URL
            do {
                fileURL = try complete(job, digest: digest)
            } catch {
                try? job.checkpoint()  // the file is whole and verified: a later run only has to move it
                throw error
            }
            return TransferResult(
                fileURL: fileURL, md5: digest, length: job.offset, resumedBytes: resumedBytes,
                receivedBytes: job.receivedThisRun, suggestedFilename: job.metadata.suggestedFilename)
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
                var metadata = TransferJob.Metadata()
                metadata.validators =
                    saved.validators.isEmpty ? (probe?.validators ?? saved.validators) : saved.validators
                metadata.totalLength = saved.totalLength ?? probe?.totalLength
                metadata.rangesSupported = saved.rangesSupported && (probe?.acceptsRanges ?? true)
                metadata.suggestedFilename = saved.suggestedFilename ?? probe?.suggestedFilename
                metadata.announcedMD5 = saved.announcedMD5.flatMap(MD5Digest.init(hexString:)) ?? probe?.announcedMD5
                metadata.restartedAfterMismatch = saved.restartedAfterMismatch
                job.metadata = metadata
                if let total = metadata.totalLength, length > total {
                    try startOver(job, probe: probe)
                    return
                }
                var md5 = MD5()
                if job.hashing && saved.hashedLength <= length {
                    md5 = saved.md5
                    try rehash(&md5, of: job.partialFile, from: saved.hashedLength, to: length)
                } else if job.hashing {
                    try rehash(&md5, of: job.partialFile, from: 0, to: length)
                }
                job.resume(at: length, md5: md5)
                try job.checkpoint()
                return
            }
        }
        try startOver(job, probe: probe)
    }

    private func startOver(_ job: TransferJob, probe: Probe?) throws(DownloadError) {
        try job.truncate()
        var metadata = TransferJob.Metadata()
        metadata.validators = probe?.validators ?? Validators()
        metadata.totalLength = probe?.totalLength
        metadata.rangesSupported = probe?.acceptsRanges ?? true
        metadata.suggestedFilename = probe?.suggestedFilename
        metadata.announcedMD5 = probe?.announcedMD5
        job.metadata = metadata
        // No checkpoint yet: an empty file has nothing to resume. The first response saves one, unless it brings a
        // small file whole (see `WindowSink.uncheckpointedSize`).
    }

    /// Requests windows until the file is whole.
    ///
    /// The disk may run behind the network: window n+1 is requested as soon as window n has arrived and the disk is
    /// past the middle of window n, so writing and hashing the tail of a window overlap the next request instead of
    /// delaying it, and at most one and a half windows wait in memory. Steps that touch the file first wait for the
    /// disk.
    private func fetchRemaining(_ job: TransferJob, restarts: inout Int) async throws(DownloadError) {
        while true {
            if Task.isCancelled {
                try await stop(job, with: .cancelled(url))
            }
            if let total = job.metadata.totalLength {
                if job.networkOffset == total { return }
                if job.networkOffset > total {
                    try await settle(job)
                    try restart(job, reason: "the partial file is longer than the resource", &restarts)
                }
            }
            if !job.metadata.rangesSupported && job.networkOffset > 0 {
                // No way to ask for the rest: the next request streams the whole resource from byte 0.
                try await settle(job)
                try job.truncate()
                try job.checkpoint()
            }

            var request = makeRequest()
            let start = job.networkOffset
            var end: Int64?
            if job.metadata.rangesSupported {
                let last = start + configuration.windowSize - 1
                end = job.metadata.totalLength.map { min(last, $0 - 1) } ?? last
                request.setValue("bytes=\(start)-\(end!)", forHTTPHeaderField: "Range")
                if start > 0, let ifRange = job.metadata.validators.ifRange {
                    request.setValue(ifRange, forHTTPHeaderField: "If-Range")
                }
            }
            let sink = WindowSink(
                job: job, start: start, end: end, ranged: end != nil, checkpointInterval: configuration.windowSize,
                progress: progress)
            let outcome = await bridge.perform(request, sink: sink)
            switch outcome {
            case .finished:
                if sink.isWholeStream {
                    // Whole: verification and the move follow (a long stream was checkpointed as it went).
                    try await settle(job)
                    return
                }
                // The last window of a file is not checkpointed: verification and the move follow at once.
                if job.metadata.totalLength != job.networkOffset { job.checkpointLater() }
                // Memory stays bounded: the next request starts once the disk is past the middle of this window, so
                // at most half a window waits while the next one arrives.
                await (sink.halfway ?? job.fence()).wait()
                if let failure = job.diskError.withLock({ $0 }) { try await stop(job, with: failure) }
                if job.metadata.totalLength == nil, let end, sink.received < end - start + 1 {
                    job.metadata.totalLength = job.networkOffset  // a short window of unknown total: that was the end
                    return
                }
            case .restartFromZero(let reason):
                try await settle(job)
                try restart(job, reason: reason, &restarts)
            case .unsatisfiable(let completeLength):
                try await settle(job)
                if let completeLength, completeLength == job.offset {
                    job.metadata.totalLength = completeLength
                    return
                }
                try restart(job, reason: "the server cannot serve bytes from \(job.offset)", &restarts)
                job.metadata.totalLength = completeLength
            case .failed(let error):
                try await stop(job, with: error)
            case .cancelled:
                try await stop(job, with: .cancelled(url))
            }
        }
    }

    /// Waits for the disk to finish what it was handed; `run()` then owns the whole job.
    /// - Throws: the disk's error.
    private func settle(_ job: TransferJob) async throws(DownloadError) {
        if let failure = await job.drained() { throw failure }
    }

    /// Ends the transfer early: lets the disk finish, saves a consistent state for the next run (or, when no byte
    /// arrived — a 404, a refused connection — leaves nothing behind) and throws.
    private func stop(_ job: TransferJob, with error: DownloadError) async throws(DownloadError) -> Never {
        let diskFailure = await job.drained()
        if job.offset == 0 {
            job.discardFiles()
        } else {
            try? job.checkpoint()
        }
        throw diskFailure ?? error
    }

    /// Empties the partial file to start the current version from byte 0, giving up after too many restarts. Call
    /// when drained.
    private func restart(_ job: TransferJob, reason: String, _ restarts: inout Int) throws(DownloadError) {
        restarts += 1
        guard restarts <= configuration.maximumRestarts else {
            job.discardFiles()
            throw .fileChanged(url, reason: "\(reason); restarted \(configuration.maximumRestarts) times")
        }
        try job.truncate()
        let kept = job.metadata
        job.metadata = TransferJob.Metadata()
        job.metadata.suggestedFilename = kept.suggestedFilename
        job.metadata.restartedAfterMismatch = kept.restartedAfterMismatch
        try job.checkpoint()
    }

    /// Moves the verified partial file into the completed area and forgets its saved state.
    private func complete(_ job: TransferJob, digest: MD5Digest?) throws(DownloadError) -> URL {
        let target: FilePlacement.Target
        if let replacing {
            target = .replace(replacing)
        } else {
            let name = DownloadDirectory.finalName(
                naming: options.naming, url: url, suggested: job.metadata.suggestedFilename)
            if case .md5OfURL = options.naming {
                target = .replace(directory.completedArea.appendingPathComponent(name))  // the name is the URL's
            } else {
                target = .unique(area: directory.completedArea, name: name)
            }
        }
        let checksum = digest.flatMap { Checksum(algorithm: .md5, digest: $0.bytes) }
        let suggested = job.metadata.suggestedFilename
        let file = try FilePlacement.place(
            job.partialFile, at: target, length: job.offset, checksum: checksum, downloadURL: url,
            willClaim: { file in willPlace?(file, job.offset, digest, suggested) })
        try? FileManager.default.removeItem(at: job.stateFile)
        return file
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

    /// Feeds bytes `from..<to` of `file` into the hash, 1 MiB at a time.
    private func rehash(_ md5: inout MD5, of file: URL, from: Int64, to: Int64) throws(DownloadError) {
        guard to > from else { return }
        do {
            let handle = try FileHandle(forReadingFrom: file)
            defer { try? handle.close() }
            try handle.seek(toOffset: UInt64(from))
            var position = from
            while position < to {
                let count = Int(min(1 << 20, to - position))
                guard let data = try handle.read(upToCount: count), !data.isEmpty else { break }
                md5.update(data: data)
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
