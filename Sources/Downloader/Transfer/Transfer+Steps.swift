import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The executor's steps for `StateMachine` actions that touch the network or the disk: a window's request, the check
/// of the whole file, its move into the completed area, and an early end.
extension Transfer {
    /// Sends one window's GET and tells the machine how it ended.
    /// - Returns: the machine's next action, and the fence that opens when the disk is past the window's middle.
    func send(
        _ window: StateMachine.Window, pipeline: DiskPipeline, machine: inout StateMachine
    ) async throws(DownloadError) -> (StateMachine.Action, DiskFence?) {
        var request = makeRequest(to: window.target)
        let overlap =
            window.overlap > 0 ? try await lastBytes(pipeline, machine.position, count: window.overlap) : Data()
        if let end = window.end {
            request.setValue("bytes=\(window.requestStart)-\(end)", forHTTPHeaderField: "Range")
            if let ifRange = window.ifRange { request.setValue(ifRange, forHTTPHeaderField: "If-Range") }
            // Under a bandwidth limit, windows are small and wait for their turn (see `BandwidthSchedule`).
            for limiter in limiters {
                do {
                    try await limiter.wait(for: end - window.requestStart + 1)
                } catch {
                    return (machine.cancel(), nil)
                }
            }
        }
        let sink = WindowSink(
            pipeline: pipeline, position: machine.position, start: window.requestStart, end: window.end,
            ranged: window.end != nil, overlap: overlap, checkpointInterval: configuration.windowSize,
            maximumUnwritten: configuration.maximumUnwrittenBytes, behindGrace: configuration.diskBehindGrace,
            grownWindowLimit: window.unwrittenLimit,
            sameVersionOnly: window.sameVersionOnly,
            firstRequestBudget: window.cutWhenSlow ? configuration.firstRequestBudget : nil)
        let end = await perform(request, sink: sink)
        if case .diskBehind = end {
            note(
                "the disk fell behind the network: the response ended early (what arrived is kept); the rest comes "
                    + "in windows")
        }
        if sink.isOtherVersion {
            warn("the server sent another version of the file in place of the rest; it replaces it from byte 0")
        }
        // The request has ended: the network side is the machine's again.
        let report = StateMachine.Report(
            position: sink.position, respondingURL: sink.respondingURL, isWholeStream: sink.isWholeStream,
            isOtherVersion: sink.isOtherVersion, received: sink.received, peakUnwritten: sink.peakUnwritten,
            hashFellBehind: sink.hashFellBehind)
        return (machine.requestEnded(end, report: report), sink.halfway)
    }

    /// Lets the disk finish, checks the file's length and finishes its digest.
    /// - Returns: the digest, and the checksum error when it differs from the caller's expectation (else from a
    ///   checksum the server announced in the algorithm that was hashed).
    /// - Throws: the disk's failure, or a file whose length is not the one announced or written.
    func verify(
        _ pipeline: DiskPipeline, metadata: ResourceMetadata, expected: Checksum?
    ) async throws(DownloadError) -> (computed: Checksum?, mismatch: DownloadError?) {
        if let failure = await pipeline.drained() { throw failure }
        pipeline.closeFile()
        let computed = pipeline.hash?.finalize()
        if let total = metadata.totalLength, total != pipeline.offset {
            throw .invalidResponse(url, reason: "the file has \(pipeline.offset) bytes, the server announced \(total)")
        }
        // The digest covers the bytes as they arrived; the file must hold exactly those.
        if let onDisk = pipeline.files.partialSize, onDisk != pipeline.offset {
            pipeline.discardFiles()
            throw .fileSystem(url, reason: "the partial file has \(onDisk) bytes where \(pipeline.offset) were written")
        }
        guard let computed, let target = target(expected, metadata: metadata, computed: computed), target != computed
        else { return (computed, nil) }
        return (computed, .checksumMismatch(url, expected: target, actual: computed))
    }

    /// Moves the verified file into the completed area.
    /// - Returns: what the transfer produced.
    func place(
        _ pipeline: DiskPipeline, machine: StateMachine, checksum computed: Checksum?, expected: Checksum?,
        resumedBytes: Int64, replacing: URL?
    ) throws(DownloadError) -> TransferResult {
        let metadata = machine.position.metadata
        let verification: Verification =
            if let computed {
                target(expected, metadata: metadata, computed: computed) == nil
                    ? .computed(computed) : .checksum(computed)
            } else {
                metadata.totalLength != nil ? .lengthOnly : .unverified
            }
        let fileURL: URL
        do {
            fileURL = try complete(pipeline, metadata: metadata, checksum: computed, replacing: replacing)
        } catch {
            // The file is whole and verified: a later run only has to move it.
            try? pipeline.checkpoint(metadata, segments: pipeline.segmentsToSave)
            throw error
        }
        return TransferResult(
            fileURL: fileURL, checksum: computed, verification: verification, length: pipeline.offset,
            resumedBytes: resumedBytes, receivedBytes: pipeline.receivedThisRun,
            suggestedFilename: metadata.suggestedFilename, peakBufferedBytes: pipeline.peakBufferedBytes,
            peakUnwrittenBytes: machine.peakUnwritten)
    }

    /// What the digest is compared with: the caller's expectation, else a checksum the server announced in the
    /// algorithm that was hashed.
    private func target(_ expected: Checksum?, metadata: ResourceMetadata, computed: Checksum) -> Checksum? {
        expected ?? metadata.announced.first { $0.algorithm == computed.algorithm }
    }

    /// Ends the transfer early: lets the disk finish, saves a consistent state for the next run (or, when no byte
    /// arrived — a 404, a refused connection — leaves nothing behind) and throws. Bytes of a server that ignores
    /// Range are worth nothing to a later request (it streams the file from byte 0 again): they are given up at once,
    /// neither written to the end, hashed nor synced (`DiskPipeline.abandon`).
    func stop(
        _ pipeline: DiskPipeline, _ position: TransferPosition, with error: DownloadError
    ) async throws(DownloadError) -> Never {
        if !position.metadata.rangesSupported {
            await pipeline.abandon(position.metadata)
            throw error
        }
        let diskFailure = await pipeline.drained()
        let metadata = position.metadata
        await Blocking.run {
            if pipeline.offset == 0 {
                pipeline.discardFiles()
            } else {
                if diskFailure != nil { pipeline.catchUpAfterFailure() }
                try? pipeline.checkpoint(metadata, segments: pipeline.segmentsToSave)
            }
        }
        throw diskFailure ?? error
    }
}
