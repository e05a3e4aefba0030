import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a finished transfer produced.
struct TransferResult: Sendable {
    /// The verified file in the completed area.
    let fileURL: URL
    /// Its checksum (`nil` when hashing was off).
    let checksum: Checksum?
    /// What was checked about it.
    let verification: Verification
    /// Its length.
    let length: Int64
    /// Bytes that were already on disk when this run started (resumed, not downloaded again).
    let resumedBytes: Int64
    /// Bytes received from the network by this run.
    let receivedBytes: Int64
    /// The server's raw `Content-Disposition` name, if it sent one.
    let suggestedFilename: String?
    /// The most received bytes that waited in memory for the disk at once.
    var peakBufferedBytes: Int64 = 0
}

/// Takes one URL to one complete, verified file, surviving interruptions without ever producing a wrong byte.
///
/// The flow is one way: probe (HEAD, only when resuming) → restore the partial file and its saved hash → fetch the
/// rest in Range windows, one after another or over several connections (each validated, then written and hashed by
/// the job's disk stages) → verify the digest → move into the completed area.
/// A run that stops early (error, cancellation) leaves the partial file and its saved state consistent, so the next
/// run resumes by Range. Scheduling, retries and persistence of receipts belong to the manager.
final class Transfer: Sendable {
    /// Settings of the engine.
    struct Configuration: Sendable {
        /// Bytes of a full Range request at first, and whenever the disk falls behind: memory stays bounded because
        /// the next window starts only once the disk is past the middle of this one (at most one and a half windows
        /// wait in memory, also when windows grow).
        var windowSize: Int64 = 8 << 20
        /// The longest window: after a window the disk kept up with, the next is four times as long, up to this, so
        /// that a link with a long round trip idles between windows less often (see `WindowSizing`).
        var maximumWindowSize: Int64 = 128 << 20
        /// Bytes of the first request when it opens a new connection (a fresh download, not a resume after a HEAD).
        ///
        /// On Linux, FoundationNetworking keeps watching a new connection for writability for the whole of its first
        /// request (the connect step asks for it and nothing takes it back), and a socket is always writable: that
        /// request spins a core until it ends. A short first request ends the spin early; later requests reuse the
        /// connection without it (README, platform notes).
        var firstWindowSize: Int64 = 16 << 10
        /// How often a file changed mid-download may restart it before giving up.
        var maximumRestarts = 3
        /// Connections per download when its options do not say (`DownloadOptions.connections`).
        var connections = 1
        /// Several connections are used only when at least twice this many bytes are missing.
        var minimumSegmentSize: Int64 = 4 << 20
        /// The most received bytes that may wait for the disk while a whole file streams in one response (a server
        /// that ignores Range, or a body without a length); beyond it the response ends (see `RequestEnd.diskBehind`).
        var maximumUnwrittenBytes: Int64 = 32 << 20
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
    let willPlace: (@Sendable (URL, Int64, Checksum?, String?) -> Void)?
    /// Bandwidth limits this transfer keeps (its own, the manager's): each Range window waits for its turn.
    let limiters: [BandwidthLimiter]
    /// Told when bytes on disk could not be trusted and were not used (the download goes on without them).
    let warn: @Sendable (String) -> Void
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
    ///   - limiters: bandwidth limits to keep.
    ///   - progress: called on the delegate queue after every chunk with the bytes on disk and the total if known.
    init(
        url: URL, options: DownloadOptions, directory: DownloadDirectory, bridge: SessionBridge,
        configuration: Configuration = Configuration(), replacing: URL? = nil,
        willPlace: (@Sendable (URL, Int64, Checksum?, String?) -> Void)? = nil, limiters: [BandwidthLimiter] = [],
        warn: @escaping @Sendable (String) -> Void = { _ in },
        progress: @escaping @Sendable (_ written: Int64, _ total: Int64?) -> Void = { _, _ in }
    ) {
        self.url = url
        self.options = options
        self.directory = directory
        self.bridge = bridge
        self.configuration = configuration
        self.replacing = replacing
        self.willPlace = willPlace
        self.limiters = limiters
        self.warn = warn
        self.progress = progress
    }

    /// Downloads, verifies and moves the file into the completed area.
    /// - Returns: the completed file and its digest.
    /// - Throws: `DownloadError`; `.cancelled` when the calling task was cancelled (the partial file is kept).
    func run() async throws(DownloadError) -> TransferResult {
        try url.validateForDownload()
        let expected = try options.expectation()
        try directory.createAreas()
        let job = TransferJob(
            url: url, files: PartialFiles(folder: directory.state, url: url), expectation: expected,
            hashesByDefault: options.computesMD5, progress: progress)
        defer { job.closeFile() }

        // A HEAD only when there is a partial file to resume (it tells whether the saved bytes are still the current
        // version before they are re-hashed), or a file this URL delivered earlier (it tells whether that file is
        // still current: then it is the answer). A fresh download learns the same from its first GET.
        var probed = job.files.hasState
        var probe = probed ? try await self.probe() : nil
        var ownFile: URL?
        if !probed, replacing == nil, let recorded = recordedFile() {
            let reused = try await reuse(recorded, expected: expected)
            if let result = reused.result { return result }
            (probe, probed, ownFile) = (reused.probe, true, recorded.url)
        }
        var position = try restore(job, probe: probe)
        let resumedBytes = position.offset
        var restarts = 0
        var connections = requestedConnections
        // A HEAD (whatever its answer) left a connection that later requests reuse (`Configuration.firstWindowSize`).
        var connectionPrimed = probed
        while true {
            do {
                try await fetchRemaining(
                    job, position: &position, restarts: &restarts, connectionPrimed: &connectionPrimed,
                    connections: &connections)
            } catch {
                // The disk may still be writing the last window: let it finish before the file is closed.
                await job.drained()
                throw error
            }
            if let failure = await job.drained() { throw failure }
            job.closeFile()
            let computed = job.hash?.finalize()
            let metadata = position.metadata
            if let total = metadata.totalLength, total != job.offset {
                throw .invalidResponse(url, reason: "the file has \(job.offset) bytes, the server announced \(total)")
            }
            // The digest covers the bytes as they arrived; the file must hold exactly those.
            if let onDisk = job.files.partialSize, onDisk != job.offset {
                job.discardFiles()
                throw .fileSystem(url, reason: "the partial file has \(onDisk) bytes where \(job.offset) were written")
            }
            // The caller's expectation, else a checksum the server announced in the algorithm that was hashed.
            let target = expected ?? metadata.announced.first { $0.algorithm == computed?.algorithm }
            if let computed, let target, target != computed {
                if !metadata.restartedAfterMismatch {
                    position.metadata.restartedAfterMismatch = true
                    position.startOver()
                    job.send(.startOver(announced: metadata.announced))
                    job.send(.checkpoint(position.metadata))
                    continue
                }
                job.discardFiles()
                throw .checksumMismatch(url, expected: target, actual: computed)
            }
            let verification: Verification =
                if let computed { target != nil ? .checksum(computed) : .computed(computed) } else {
                    metadata.totalLength != nil ? .lengthOnly : .unverified
                }
            let fileURL: URL
            do {
                fileURL = try complete(job, metadata: metadata, checksum: computed, replacing: replacing ?? ownFile)
            } catch {
                // The file is whole and verified: a later run only has to move it.
                try? job.checkpoint(metadata, segments: job.segmentsToSave)
                throw error
            }
            return TransferResult(
                fileURL: fileURL, checksum: computed, verification: verification, length: job.offset,
                resumedBytes: resumedBytes, receivedBytes: job.receivedThisRun,
                suggestedFilename: metadata.suggestedFilename, peakBufferedBytes: job.peakBufferedBytes)
        }
    }

    // MARK: - Steps

    /// Requests windows until the file is whole.
    ///
    /// The disk may run behind the network: window n+1 is requested as soon as window n has arrived and the disk is
    /// past the middle of window n, so writing and hashing the tail of a window overlap the next request instead of
    /// delaying it, and at most one and a half windows wait in memory. Steps that touch the file first wait for the
    /// disk.
    private func fetchRemaining(
        _ job: TransferJob, position: inout TransferPosition, restarts: inout Int, connectionPrimed: inout Bool,
        connections: inout Int
    ) async throws(DownloadError) {
        // Where the URL redirected to in this run (see `makeRequest(to:)`); every restart asks the URL itself again.
        var redirectTarget: URL?
        var sizing = WindowSizing(base: configuration.windowSize, maximum: configuration.maximumWindowSize)
        while true {
            if Task.isCancelled {
                try await stop(job, position, with: .cancelled(url))
            }
            if fetchesInSegments(position, connections: connections) {
                switch await fetchSegments(job, position: &position, connections: connections) {
                case .finished:
                    return
                case .fallBack(let reason):
                    // Never a spliced file: the current version from byte 0, on one connection for the rest of the run.
                    connections = 1
                    try await restart(job, &position, reason: reason, &restarts)
                    continue
                case .failed(let error):
                    try await stop(job, position, with: error)
                case .cancelled:
                    try await stop(job, position, with: .cancelled(url))
                }
            }
            if let total = position.metadata.totalLength {
                if position.offset == total { return }
                if position.offset > total {
                    try await restart(job, &position, reason: "the partial file is longer than the resource", &restarts)
                }
            }
            if !position.metadata.rangesSupported && position.offset > 0 {
                // No way to ask for the rest: the next request streams the whole resource from byte 0.
                position.startOver()
                job.send(.startOver(announced: position.metadata.announced))
                job.send(.checkpoint(position.metadata))
            }

            var request = makeRequest(to: redirectTarget)
            let start = position.offset
            let metadata = position.metadata
            var end: Int64?
            var requestStart = start
            var overlap = Data()
            if metadata.rangesSupported {
                // Without a strong ETag a continuation cannot ask "still the same version?": it asks for the bytes
                // before `start` as well, and the sink compares them with what the file has.
                if start > 0 && !metadata.validators.hasStrongETag {
                    let count = Int(min(Int64(Self.continuityCheckLength), start))
                    overlap = try await lastBytes(job, position, count: count)
                    requestStart = start - Int64(overlap.count)
                }
                // Under a bandwidth limit, windows are small and wait for their turn (see `BandwidthSchedule`).
                // The short first request only on a new connection (a reused one does not spin, see
                // `WarmConnections`): a small file after another from the same server is one request.
                let reuses = connectionPrimed || bridge.hasWarmConnection(to: url)
                let firstWindow = reuses ? sizing.full : configuration.firstWindowSize
                let windowSize = limiters.map(\.windowSize).reduce(min(sizing.full, firstWindow), min)
                let last = start + windowSize - 1
                end = metadata.totalLength.map { min(last, $0 - 1) } ?? last
                request.setValue("bytes=\(requestStart)-\(end!)", forHTTPHeaderField: "Range")
                if start > 0, let ifRange = metadata.validators.ifRange {
                    request.setValue(ifRange, forHTTPHeaderField: "If-Range")
                }
            }
            if let end {
                for limiter in limiters {
                    do {
                        try await limiter.wait(for: end - requestStart + 1)
                    } catch {
                        try await stop(job, position, with: .cancelled(url))
                    }
                }
            }
            // The bytes from the resume point this request asks for (the overlap before it aside).
            let windowLength = end.map { $0 - start + 1 }
            let sink = WindowSink(
                job: job, position: position, start: requestStart, end: end, ranged: end != nil, overlap: overlap,
                checkpointInterval: configuration.windowSize, maximumUnwritten: configuration.maximumUnwrittenBytes,
                grownWindowLimit: windowLength.flatMap(sizing.unwrittenLimit(forWindowOf:)))
            let outcome = await bridge.perform(request, sink: sink)
            position = sink.position  // the request has ended: the network side is ours again
            // Short only once per run: after a restart the whole file is asked for in one window even if libcurl
            // dropped the cancelled connection, because a resource without validators that changes between requests
            // can only be fetched whole by a single request.
            connectionPrimed = true
            switch outcome {
            case .finished:
                // Later windows of this run go straight to where the URL led (a CDN, a signed URL): one round trip
                // per window instead of two.
                if let answered = sink.respondingURL, answered != url { redirectTarget = answered }
                if sink.isWholeStream {
                    return  // whole: verification and the move follow (a long stream was checkpointed as it went)
                }
                if let windowLength {
                    sizing.windowEnded(
                        length: windowLength, peakUnwritten: sink.peakUnwritten, hashFellBehind: sink.hashFellBehind)
                }
                // The last window of a file is not checkpointed (verification and the move follow at once), nor is
                // a small file (see `ResponseJudge.uncheckpointedSize`).
                let small =
                    position.metadata.totalLength.map {
                        ResponseJudge.isSmall($0, windowSize: configuration.windowSize)
                    } ?? false
                if !small && position.metadata.totalLength != position.offset {
                    job.send(.checkpoint(position.metadata))
                }
                // Memory stays bounded: the next request starts once the disk is past the middle of this window, so
                // at most half a window waits while the next one arrives.
                await (sink.halfway ?? job.fence()).wait()
                if let failure = job.failure { try await stop(job, position, with: failure) }
                if position.metadata.totalLength == nil, let end, sink.received < end - requestStart + 1 {
                    position.metadata.totalLength = position.offset  // a short window of unknown total: the end
                    return
                }
            case .failed(let error) where redirectTarget != nil && Self.sendsBackToOriginal(error):
                // The target refused (an expired signature, a moved object): ask the original URL again.
                redirectTarget = nil
            case .restartFromZero(let reason):
                redirectTarget = nil
                try await restart(job, &position, reason: reason, &restarts)
            case .unsatisfiable(let completeLength):
                redirectTarget = nil
                if let completeLength, completeLength == position.offset {
                    position.metadata.totalLength = completeLength
                    return
                }
                if let completeLength, completeLength < position.offset {
                    try await restart(
                        job, &position, reason: "the server cannot serve bytes from \(position.offset)", &restarts)
                    position.metadata.totalLength = completeLength
                } else {
                    // A 416 for bytes the resource has (or with no length at all): this server's ranges are broken.
                    try await fetchWhole(
                        job, &position, &connections,
                        reason: "the server refuses a range of bytes it has (416): it is fetched whole, without ranges")
                }
            case .wholeWithoutRanges(let reason):
                try await fetchWhole(job, &position, &connections, reason: reason)
            case .unreliableETag(let reason):
                // The same bytes from backends that disagree on ETags: judged by length, Last-Modified and the bytes
                // before each resume point (the continuity check of a resource without a strong validator).
                warn(reason)
                position.metadata.ignoresETag = true
                position.metadata.validators.etag = nil
                connections = 1
            case .diskBehind:
                // What arrived is kept; the next windows, of the base size again, wait for the disk as windows do. A
                // new version streamed here counts as a restart: a resource that changes with every request must not
                // loop forever.
                if sink.isOtherVersion {
                    restarts += 1
                    guard restarts <= configuration.maximumRestarts else {
                        try await stop(
                            job, position,
                            with: .fileChanged(
                                url, reason: "the resource changed with every request; restarted \(restarts - 1) times")
                        )
                    }
                }
                sizing.diskFellBehind()
                if let failure = await job.drained() { try await stop(job, position, with: failure) }
                job.send(.checkpoint(position.metadata))
            case .failed(let error):
                try await stop(job, position, with: error)
            case .cancelled:
                try await stop(job, position, with: .cancelled(url))
            }
        }
    }
}
