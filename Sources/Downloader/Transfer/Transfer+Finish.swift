import Foundation

/// A whole file's last steps: the check of its digest and its move into the completed area — in one hop off the
/// cooperative threads when the disk has the last window's bytes (`finish`), else step by step (`verify`, `place`).
extension Transfer {
    /// Lets the disk finish, checks the file's length and finishes its digest.
    /// - Returns: the digest, and the checksum error when it differs from the caller's expectation (else from a
    ///   checksum the server announced in the algorithm that was hashed).
    /// - Throws: the disk's failure, or a file whose length is not the one announced or written.
    func verify(
        _ pipeline: DiskPipeline, metadata: ResourceMetadata, expected: Checksum?
    ) async throws(DownloadError) -> (computed: Checksum?, mismatch: DownloadError?) {
        if let failure = await pipeline.drained() { throw failure }
        return try checkDigest(pipeline, metadata: metadata, expected: expected)
    }

    /// `verify` once the disk has finished (the pipeline is drained).
    private func checkDigest(
        _ pipeline: DiskPipeline, metadata: ResourceMetadata, expected: Checksum?
    ) throws(DownloadError) -> (computed: Checksum?, mismatch: DownloadError?) {
        // Cancelled while the last bytes waited to be written: they were dropped (`discardUnwritten`), which is a
        // stop, not a short file.
        if pipeline.discardsWrites { throw .cancelled(url) }
        // The writers stay open: the record is written through one (`recordFile`), and `complete` closes them.
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

    /// How `finish` ended.
    enum Finish: Sendable {
        /// The file is in the completed area.
        case placed(TransferResult)
        /// The machine chose another step (a stop, a restart after a wrong digest, a cancellation's): the executor
        /// goes on with this machine, its action and the digest computed, if any.
        case goOn(StateMachine, StateMachine.Action, Checksum?)
    }

    /// A whole file's last steps in one hop off the cooperative threads: the disk finishes (on this hop's thread when
    /// the disk queue is idle, `DiskPipeline.drainedHere`), the digest is checked and the file placed, each as the
    /// machine decides. As separate steps they cost a small file four thread hand-offs instead of two: the disk queue
    /// woken for the body and the task woken by its fence, then the placement's hop there and back (issue #52).
    /// - Parameters:
    ///   - pipeline: the transfer's disk pipeline.
    ///   - machine: the machine, waiting for the disk (`isWholeAfterDisk`).
    ///   - expected: the caller's checksum, if any.
    ///   - resumedBytes: the bytes the run began with.
    ///   - replacing: a completed file the placed one replaces, if any.
    /// - Returns: the result, or the machine and the step it chose instead of the placement.
    /// - Throws: what `verify` and `place` throw.
    func finish(
        _ pipeline: DiskPipeline, machine: StateMachine, expected: Checksum?, resumedBytes: Int64, replacing: URL?
    ) async throws(DownloadError) -> Finish {
        try await Blocking.run { () throws(DownloadError) -> Finish in
            var machine = machine
            var action = machine.diskPassedMark(failure: pipeline.drainedHere())
            // A cancellation (which drops what waits to be written, `discardUnwritten`) is the executor's to see.
            if case .proceed = action, !pipeline.discardsWrites {
                action = machine.next(warmConnection: false)
            }
            guard case .verify = action else { return .goOn(machine, action, nil) }
            let digest = try self.checkDigest(pipeline, metadata: machine.position.metadata, expected: expected)
            action = machine.digestChecked(mismatch: digest.mismatch)
            guard case .place = action else { return .goOn(machine, action, digest.computed) }
            return .placed(
                try self.place(
                    pipeline, machine: machine, checksum: digest.computed, expected: expected,
                    resumedBytes: resumedBytes, replacing: replacing))
        }
    }

    /// Moves the verified file into the completed area.
    /// - Returns: what the transfer produced.
    func place(
        _ pipeline: DiskPipeline, machine: StateMachine, checksum computed: Checksum?, expected: Checksum?,
        resumedBytes: Int64, replacing: URL?
    ) throws(DownloadError) -> TransferResult {
        let metadata = machine.position.metadata
        let verification = verification(computed, expected: expected, metadata: metadata)
        let placed: (file: URL, name: String)
        do {
            placed = try complete(pipeline, metadata: metadata, checksum: computed, replacing: replacing)
        } catch {
            // The file is whole and verified: a later run only has to move it.
            try? pipeline.checkpoint(metadata, segments: pipeline.segmentsToSave)
            throw error
        }
        return TransferResult(
            fileURL: placed.file, checksum: computed, verification: verification, length: pipeline.offset,
            resumedBytes: resumedBytes, receivedBytes: pipeline.receivedThisRun,
            suggestedFilename: metadata.suggestedFilename, peakBufferedBytes: pipeline.peakBufferedBytes,
            peakUnwrittenBytes: machine.peakUnwritten, placedName: placed.name)
    }

    /// What was checked about a file with digest `computed`: a checksum given or announced, else the digest computed
    /// alone, else only the announced length, else nothing.
    func verification(_ computed: Checksum?, expected: Checksum?, metadata: ResourceMetadata) -> Verification {
        guard let computed else { return metadata.totalLength != nil ? .lengthOnly : .unverified }
        return target(expected, metadata: metadata, computed: computed) == nil
            ? .computed(computed) : .checksum(computed)
    }

    /// What the digest is compared with: the caller's expectation, else a checksum the server announced in the
    /// algorithm that was hashed.
    func target(_ expected: Checksum?, metadata: ResourceMetadata, computed: Checksum) -> Checksum? {
        expected ?? metadata.announced.first { $0.algorithm == computed.algorithm }
    }
}
