import Foundation

/// The mutable state of one transfer: the partial file's writer, the running hash and what is known of the
/// resource.
///
/// Three owners, one per stage of the pipeline:
/// - The *network side* — `Transfer.run()` between requests and the sink on the delegate queue during one — owns
///   `metadata` and `networkOffset` (bytes accepted so far). Requests are sequential, so these need no lock.
/// - The serial `disk` queue owns the writer, `offset` (bytes written) and `receivedThisRun`.
/// - The serial `hasher` queue owns the hash, `hashedOffset` and `checkpointOffset`, and saves checkpoints. It gets
///   each batch after the disk wrote it, so the hash never covers a byte that is not in the file, and writing the
///   next batch overlaps hashing this one (two cores in use instead of one).
/// The disk stages may run behind the network: the next request starts once they are past the middle of the previous
/// window, so they finish it while the next one arrives. Work that the network side queues for them carries a snapshot of `metadata` instead of
/// reading it later. `drained()` waits until both stages have done everything handed to them; after that `run()`
/// owns the whole job again.
final class TransferJob: @unchecked Sendable {
    /// What is known of the resource's version, saved with every checkpoint.
    struct Metadata: Sendable {
        var validators = Validators()
        var totalLength: Int64?
        var rangesSupported = true
        var suggestedFilename: String?
        /// The whole file's checksums the server announced.
        var announced: [Checksum] = []
        var restartedAfterMismatch = false
    }

    let url: URL
    let partialFile: URL
    let stateFile: URL
    /// The checksum the caller expects: its algorithm is the one hashed.
    let expectation: Checksum?
    /// Whether to hash without an expectation (the server's announced algorithm, else MD5).
    let hashesByDefault: Bool
    /// Whether bytes are hashed (`hash` is set); without hashing the saved state claims no hashed bytes, so that a
    /// later hashed resume re-hashes the file from byte 0.
    var hashing: Bool { hash != nil }
    /// Writes batches in order.
    let disk = DispatchQueue(label: "Downloader.TransferJob.disk")
    /// Hashes written batches in order and saves checkpoints.
    let hasher = DispatchQueue(label: "Downloader.TransferJob.hash")

    // Network side.
    var metadata = Metadata()
    /// The last bytes accepted (at most twice `Transfer.continuityCheckLength`), kept while the resource has no strong
    /// validator: the next request compares them with what the server sends before them (no splice).
    var recentBytes = Data()
    var keepsRecentBytes = false
    /// Bytes accepted from responses and handed to the disk (equals `offset` once drained).
    var networkOffset: Int64 = 0

    // Disk queue.
    var writer: FileWriter?
    /// Bytes in the partial file.
    var offset: Int64 = 0
    /// Bytes received from the network by this run and written (not counting what was already on disk).
    var receivedThisRun: Int64 = 0

    // Hash queue.
    /// The running hash, chosen when byte 0 arrives (see `chooseHash`); `nil` without hashing.
    var hash: StreamingHash?
    /// Bytes covered by `hash` (or that would be, without hashing); never more than `offset`.
    var hashedOffset: Int64 = 0
    /// `hashedOffset` at the last saved checkpoint.
    var checkpointOffset: Int64 = 0

    /// The first write or checkpoint error; the network side fails the request when it sees one.
    let diskError = Locked<DownloadError?>(nil)
    /// Chunks handed over and not yet taken by the disk queue, and whether a drain is scheduled on it.
    private let inbox = Locked((chunks: [Data](), scheduled: false))

    init(
        url: URL, partialFile: URL, stateFile: URL, expectation: Checksum? = nil, hashesByDefault: Bool = true
    ) {
        self.expectation = expectation
        self.hashesByDefault = hashesByDefault
        hash = expectation.map { StreamingHash($0.algorithm) } ?? (hashesByDefault ? StreamingHash(.md5) : nil)
        self.url = url
        self.partialFile = partialFile
        self.stateFile = stateFile
    }

    // MARK: - Network side

    /// Hands bytes to the disk queue (called on the delegate queue, in body order).
    ///
    /// Bytes are appended to an inbox; the disk queue is woken only when it is idle and takes everything waiting in
    /// one batch. At full speed it therefore writes and hashes large batches with few thread wake-ups; when the
    /// flow slows or stops (a stall, a pause) the idle disk takes each chunk at once, so nothing received waits in
    /// memory for more data — a `kill -9` loses only what is in flight.
    /// - Parameters:
    ///   - data: the chunk.
    ///   - metadata: the metadata to save if this batch reaches a checkpoint.
    ///   - checkpointInterval: save the state every this many bytes (`nil`: the caller checkpoints).
    ///   - progress: called on the disk queue after each batch with the bytes on disk.
    func submit(
        _ data: Data, metadata: Metadata, checkpointInterval: Int64?, progress: @escaping @Sendable (Int64) -> Void
    ) {
        networkOffset += Int64(data.count)
        if keepsRecentBytes {
            recentBytes.append(data)
            let keep = Transfer.continuityCheckLength
            if recentBytes.count > 2 * keep { recentBytes = recentBytes.suffix(keep) }
        }
        let wake = inbox.withLock { inbox -> Bool in
            inbox.chunks.append(data)
            defer { inbox.scheduled = true }
            return !inbox.scheduled
        }
        guard wake else { return }
        disk.async { [self] in
            drainInbox(metadata: metadata, checkpointInterval: checkpointInterval, progress: progress)
        }
    }

    /// Queues a checkpoint after everything handed over so far.
    func checkpointLater() {
        let metadata = self.metadata
        disk.async { [self] in
            hasher.async { [self] in
                guard diskError.withLock({ $0 == nil }) else { return }
                do throws(DownloadError) {
                    try checkpoint(metadata)
                } catch {
                    fail(error)
                }
            }
        }
    }

    /// Queues work for the disk queue after everything handed to it so far; its error becomes `diskError`.
    func writeLater(_ work: @escaping @Sendable (TransferJob) throws(DownloadError) -> Void) {
        disk.async { [self] in
            guard diskError.withLock({ $0 == nil }) else { return }
            do throws(DownloadError) {
                try work(self)
            } catch {
                fail(error)
            }
        }
    }

    /// Runs work once both disk stages have done everything handed over so far, and waits for it. Both stages and
    /// the network side are blocked meanwhile, so the work may touch any part of the job.
    /// - Returns: the work's error.
    func runNow(_ work: @escaping @Sendable (TransferJob) throws(DownloadError) -> Void) -> DownloadError? {
        disk.sync { [self] () -> DownloadError? in
            hasher.sync { [self] () -> DownloadError? in
                do throws(DownloadError) {
                    try work(self)
                    return nil
                } catch {
                    return error
                }
            }
        }
    }

    /// Returns a fence that opens when both disk stages have done everything handed over until now.
    func fence() -> DiskFence {
        let fence = DiskFence()
        disk.async { [hasher] in hasher.async { fence.open() } }
        return fence
    }

    /// Waits until the disk stages have written and hashed everything handed to them; `run()` then owns the whole
    /// job.
    /// - Returns: the disk error, if any.
    @discardableResult
    func drained() async -> DownloadError? {
        await fence().wait()
        // The queues are idle: these return at once and make the hand-off explicit to ThreadSanitizer, which does
        // not always see it through the continuation.
        disk.sync {}
        hasher.sync {}
        return diskError.withLock { $0 }
    }

    // MARK: - Disk stages

    private func fail(_ error: DownloadError) {
        diskError.withLock { if $0 == nil { $0 = error } }
    }

    /// On the disk queue: writes every batch waiting in the inbox and passes each to the hash queue.
    private func drainInbox(
        metadata: Metadata, checkpointInterval: Int64?, progress: @escaping @Sendable (Int64) -> Void
    ) {
        while true {
            let batch = inbox.withLock { inbox -> [Data]? in
                guard !inbox.chunks.isEmpty else {
                    inbox.scheduled = false
                    return nil
                }
                defer { inbox.chunks.removeAll(keepingCapacity: true) }
                return inbox.chunks
            }
            guard let batch else { return }
            guard diskError.withLock({ $0 == nil }) else { continue }  // drop: the request is failing
            var written: Int64 = 0
            do throws(DownloadError) {
                try openWriter()
                for chunk in batch {
                    let failure = chunk.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) -> DownloadError? in
                        do throws(DownloadError) {
                            try writer!.write(buffer, downloadURL: url)
                            return nil
                        } catch {
                            return error
                        }
                    }
                    if let failure { throw failure }
                    written += Int64(chunk.count)
                }
            } catch {
                fail(error)
                continue
            }
            offset += written
            receivedThisRun += written
            progress(offset)
            hasher.async { [self] in
                hash(batch, metadata: metadata, checkpointInterval: checkpointInterval)
            }
        }
    }

    /// On the hash queue: hashes a written batch and saves a checkpoint when one is due.
    private func hash(_ batch: [Data], metadata: Metadata, checkpointInterval: Int64?) {
        for chunk in batch {
            if hash != nil { chunk.withUnsafeBytes { hash!.update(bufferPointer: $0) } }
            hashedOffset += Int64(chunk.count)
        }
        if let checkpointInterval, hashedOffset - checkpointOffset >= checkpointInterval,
            diskError.withLock({ $0 == nil })
        {
            do throws(DownloadError) {
                try checkpoint(metadata)
            } catch {
                fail(error)
            }
        }
    }

    /// Opens the partial file for appending if it is not open yet (disk queue, or drained).
    func openWriter() throws(DownloadError) {
        if writer == nil { writer = try FileWriter(fileURL: partialFile, truncate: false, downloadURL: url) }
    }

    /// Empties the partial file and the hash, and forgets the saved state (it described other bytes): the next
    /// byte written is byte 0. Call in `runNow` or when drained.
    func truncate() throws(DownloadError) {
        if FileManager.default.fileExists(atPath: stateFile.path) { try? FileManager.default.removeItem(at: stateFile) }
        writer?.close()
        writer = try FileWriter(fileURL: partialFile, truncate: true, downloadURL: url)
        hash = hash.map { StreamingHash($0.algorithm) }
        offset = 0
        hashedOffset = 0
        networkOffset = 0
        recentBytes = Data()
        checkpointOffset = 0
    }

    /// Closes the writer and deletes the partial file and its saved state: nothing of this download is kept.
    /// Call when drained.
    func discardFiles() {
        writer?.close()
        writer = nil
        try? FileManager.default.removeItem(at: partialFile)
        try? FileManager.default.removeItem(at: stateFile)
    }

    /// Chooses the hash for a file about to start from byte 0 (hash queue idle): the caller's expectation, else the
    /// strongest checksum the server announces, else MD5; none when hashing is off and nothing is expected.
    func chooseHash(announced: [Checksum]) {
        guard hashedOffset == 0, expectation == nil, hashesByDefault else { return }
        hash = StreamingHash(DigestHeaders.preferred(announced)?.algorithm ?? .md5)
    }

    /// Continues from a partial file of `length` bytes whose first `length` bytes `hash` covers (drained).
    func resume(at length: Int64, hash: StreamingHash?) {
        self.hash = hash
        offset = length
        hashedOffset = length
        networkOffset = length
    }

    /// The state to save beside the partial file.
    func partialState(_ metadata: Metadata) -> PartialState {
        PartialState(
            url: url, hashedLength: hash != nil ? hashedOffset : 0, hash: hash,
            validators: metadata.validators, totalLength: metadata.totalLength,
            rangesSupported: metadata.rangesSupported, suggestedFilename: metadata.suggestedFilename,
            announced: metadata.announced, restartedAfterMismatch: metadata.restartedAfterMismatch)
    }

    /// Saves the state atomically. Call on the hash queue with a snapshot, or in `runNow` or when drained without
    /// one.
    func checkpoint(_ metadata: Metadata? = nil) throws(DownloadError) {
        try partialState(metadata ?? self.metadata).save(to: stateFile)
        checkpointOffset = hashedOffset
    }
}

/// A point in the disk queue's work that the network side can wait for without blocking a thread.
final class DiskFence: Sendable {
    private let state = Locked<(isOpen: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    /// Opens the fence, resuming its waiter.
    func open() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.isOpen = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Waits until the fence is open (one waiter at a time).
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isOpen = state.withLock { state -> Bool in
                if !state.isOpen { state.waiter = continuation }
                return state.isOpen
            }
            if isOpen { continuation.resume() }
        }
    }
}
