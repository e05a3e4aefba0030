import Foundation

/// One step of the disk work, in the order the network side asks for it.
enum DiskCommand: Sendable {
    /// Append bytes to the partial file (then hash them).
    case write(Data)
    /// Write bytes at an offset (a segment of a download fetched over several connections); they are hashed when
    /// every byte before them is in the file (the watermark reaches them).
    case writeAt(Data, offset: Int64)
    /// Empty the partial file and the hash and forget the saved state: the next byte written is byte 0. The hash is
    /// chosen for the new file (the caller's expectation, else the strongest of `announced`, else MD5).
    case startOver(announced: [Checksum])
    /// What later checkpoints save (and the total that progress reports); with `checkpointEvery`, a checkpoint is
    /// saved each time that many more bytes are hashed (a whole body streamed in one request).
    case describe(ResourceMetadata, checkpointEvery: Int64?)
    /// Save the state with this metadata once everything before is written and hashed (also `describe`s it).
    case checkpoint(ResourceMetadata)
    /// Open the fence once everything before is written and hashed.
    case fence(DiskFence)
}

/// The disk side of one transfer: the partial file's writer, the running hash and the saved state, fed by one ordered
/// stream of `DiskCommand`s.
///
/// Two serial stages, each the only owner of its fields:
/// - the `disk` queue takes commands in order, owns the writer, `offset` and `receivedThisRun`, and passes written
///   bytes on;
/// - the `hasher` queue owns the hash, `hashedOffset` and the saved state. It gets each batch after the disk wrote it,
///   so the hash never covers a byte that is not in the file, and writing the next batch overlaps hashing this one.
/// The network side (`Transfer` and the request's sink, see `TransferPosition`) only calls `send(_:)`, which never
/// blocks, and reads `failure`. `drained()` waits until both stages have done every command; after it, and before
/// the first command, `Transfer.run()` may read and change every field directly.
final class TransferJob: @unchecked Sendable {
    let url: URL
    let partialFile: URL
    let stateFile: URL
    /// The checksum the caller expects: its algorithm is the one hashed.
    let expectation: Checksum?
    /// Whether to hash without an expectation (the server's announced algorithm, else MD5).
    let hashesByDefault: Bool
    /// Called on the disk queue after each batch with the bytes in the file and the total if known.
    private let progress: @Sendable (Int64, Int64?) -> Void
    private let disk = DispatchQueue(label: "Downloader.TransferJob.disk")
    let hasher = DispatchQueue(label: "Downloader.TransferJob.hash")

    /// The first write or checkpoint error. Commands after it are dropped (fences still open).
    private let error = Locked<DownloadError?>(nil)
    /// Commands sent and not yet taken by the disk queue, and whether a drain is scheduled on it.
    private let inbox = Locked((commands: [DiskCommand](), scheduled: false))
    /// Bytes sent and not yet hashed (held in memory), and the most there ever were.
    private let buffered = Locked((now: Int64(0), peak: Int64(0)))

    // Disk queue.
    var writer: FileWriter?
    /// Bytes in the partial file from byte 0 without a gap (the watermark).
    var offset: Int64 = 0
    /// Segmented: the writer at offsets, and the ranges written after `offset` (sorted, disjoint, not touching it).
    var positional: PositionalWriter?
    var beyond: [Range<Int64>] = []
    /// Whether the file is written in segments (its saved state lists them).
    var segmented = false
    /// Bytes written at offsets since the last checkpoint was queued.
    var segmentBytesSinceCheckpoint: Int64 = 0
    /// Bytes received from the network by this run and written (not counting what was already on disk).
    var receivedThisRun: Int64 = 0
    /// The total length the last described metadata gives (for progress).
    private var total: Int64?

    // Hash queue.
    /// The running hash; `nil` without hashing.
    var hash: StreamingHash?
    /// Bytes covered by `hash` (or that would be, without hashing); never more than `offset`.
    private(set) var hashedOffset: Int64 = 0
    /// What checkpoints save, and how often a streamed body saves one.
    private var described = ResourceMetadata()
    private var checkpointEvery: Int64?
    /// `hashedOffset` at the last saved checkpoint.
    private var checkpointOffset: Int64 = 0
    /// Reads back bytes that were written out of order when the watermark reaches them.
    var reader: FileHandle?

    /// Creates the disk side of a transfer; nothing is opened until the first command.
    init(
        url: URL, partialFile: URL, stateFile: URL, expectation: Checksum? = nil, hashesByDefault: Bool = true,
        progress: @escaping @Sendable (Int64, Int64?) -> Void = { _, _ in }
    ) {
        self.url = url
        self.partialFile = partialFile
        self.stateFile = stateFile
        self.expectation = expectation
        self.hashesByDefault = hashesByDefault
        self.progress = progress
        hash = expectation.map { StreamingHash($0.algorithm) } ?? (hashesByDefault ? StreamingHash(.md5) : nil)
    }

    /// The first disk error, if any (any thread).
    var failure: DownloadError? { error.withLock { $0 } }

    /// The most bytes that were ever sent and not yet written and hashed: the memory the pipeline held.
    var peakBufferedBytes: Int64 { buffered.withLock { $0.peak } }

    // MARK: - Network side

    /// Queues a command after everything sent before; never blocks.
    ///
    /// The disk queue is woken only when it is idle and takes everything waiting in one batch: at full speed it
    /// writes and hashes large batches with few wake-ups, and when the flow slows or stops the idle disk takes each
    /// chunk at once, so nothing received waits in memory for more data (a `kill -9` loses only what is in flight).
    /// - Returns: the disk error, if one happened (the caller fails its request).
    @discardableResult
    func send(_ command: DiskCommand) -> DownloadError? {
        if case .write(let data) = command { changeBuffered(by: Int64(data.count)) }
        let wake = inbox.withLock { inbox -> Bool in
            inbox.commands.append(command)
            defer { inbox.scheduled = true }
            return !inbox.scheduled
        }
        if wake { disk.async { [self] in drainInbox() } }
        return failure
    }

    /// Returns a fence that opens when both stages have done every command sent until now.
    func fence() -> DiskFence {
        let fence = DiskFence()
        send(.fence(fence))
        return fence
    }

    /// Waits until both stages have done every command sent; `run()` then owns the whole job.
    /// - Returns: the disk error, if any.
    @discardableResult
    func drained() async -> DownloadError? {
        await fence().wait()
        // The queues are idle: these return at once and make the hand-off explicit to ThreadSanitizer, which does
        // not always see it through the continuation.
        disk.sync {}
        hasher.sync {}
        return failure
    }

    // MARK: - Disk queue

    private func changeBuffered(by count: Int64) {
        buffered.withLock { buffered in
            buffered.now += count
            buffered.peak = max(buffered.peak, buffered.now)
        }
    }

    func fail(_ failure: DownloadError) {
        error.withLock { if $0 == nil { $0 = failure } }
    }

    /// Carries out every command waiting in the inbox, in order; consecutive writes reach the hasher as one batch.
    private func drainInbox() {
        while true {
            let commands = inbox.withLock { inbox -> [DiskCommand]? in
                guard !inbox.commands.isEmpty else {
                    inbox.scheduled = false
                    return nil
                }
                defer { inbox.commands.removeAll(keepingCapacity: true) }
                return inbox.commands
            }
            guard let commands else { return }
            var batch: [Data] = []
            for command in commands {
                if case .write(let data) = command {
                    if write(data) { batch.append(data) } else { changeBuffered(by: -Int64(data.count)) }
                    continue
                }
                hashLater(&batch)
                switch command {
                case .write: break
                case .writeAt(let data, let at):
                    write(data, at: at)
                    changeBuffered(by: -Int64(data.count))
                case .startOver(let announced):
                    guard failure == nil else { continue }
                    hasher.sync { resetHash(announced: announced) }
                    do throws(DownloadError) {
                        try truncate()
                    } catch {
                        fail(error)
                    }
                case .describe(let metadata, let every):
                    total = metadata.totalLength
                    hasher.async { [self] in
                        described = metadata
                        checkpointEvery = every
                    }
                case .checkpoint(let metadata):
                    total = metadata.totalLength
                    segmentBytesSinceCheckpoint = 0
                    let segments = segmentsToSave
                    hasher.async { [self] in
                        described = metadata
                        checkpointEvery = nil
                        saveCheckpoint(segments: segments)
                    }
                case .fence(let fence):
                    hasher.async { fence.open() }
                }
            }
            hashLater(&batch)
            progress(offset + beyond.reduce(0) { $0 + Int64($1.count) }, total)
        }
    }

    /// Appends bytes (disk queue). - Returns: whether they were written.
    private func write(_ data: Data) -> Bool {
        guard failure == nil else { return false }  // dropped: the request is failing
        do throws(DownloadError) {
            try openWriter()
            try Self.withBytes(of: data) { (buffer) throws(DownloadError) in try writer!.write(buffer, downloadURL: url)
            }
        } catch {
            fail(error)
            return false
        }
        offset += Int64(data.count)
        receivedThisRun += Int64(data.count)
        return true
    }

    /// Runs `body` on the bytes of `data`, keeping the typed error (`withUnsafeBytes` rethrows untyped).
    static func withBytes(
        of data: Data, _ body: (UnsafeRawBufferPointer) throws(DownloadError) -> Void
    ) throws(DownloadError) {
        let failure = data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) -> DownloadError? in
            do throws(DownloadError) {
                try body(buffer)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// Hands written bytes to the hasher (disk queue).
    private func hashLater(_ batch: inout [Data]) {
        guard !batch.isEmpty else { return }
        let written = batch
        batch = []
        hasher.async { [self] in hash(written) }
    }

    /// Opens the partial file for appending if it is not open yet (disk queue, or drained).
    func openWriter() throws(DownloadError) {
        if writer == nil { writer = try FileWriter(fileURL: partialFile, truncate: false, downloadURL: url) }
    }

    /// Empties the partial file (disk queue, after the hasher forgot the state, or drained).
    private func truncate() throws(DownloadError) {
        closeFile()
        beyond = []
        segmented = false
        // An empty (or missing) file is not truncated: ext4 flushes a file truncated to zero when it is closed
        // (`auto_da_alloc`), which made closing a fresh 1 GiB download wait over a second for the disk.
        let empty = (FileManager.default.sizeOfItem(at: partialFile) ?? 0) == 0
        writer = try FileWriter(fileURL: partialFile, truncate: !empty, downloadURL: url)
        offset = 0
    }

    // MARK: - Hash queue

    /// Hashes a written batch and saves a checkpoint when one is due.
    private func hash(_ batch: [Data]) {
        var count: Int64 = 0
        for chunk in batch {
            if hash != nil { chunk.withUnsafeBytes { hash!.update(bufferPointer: $0) } }
            count += Int64(chunk.count)
        }
        hashedOffset += count
        changeBuffered(by: -count)
        if let checkpointEvery, hashedOffset - checkpointOffset >= checkpointEvery { saveCheckpoint(segments: nil) }
    }

    /// Sets the bytes the hash covers (hash queue).
    func setHashedOffset(_ value: Int64) {
        hashedOffset = value
    }

    /// Forgets the hash and the saved state (they described other bytes) and chooses the hash for a new file.
    private func resetHash(announced: [Checksum]) {
        if FileManager.default.fileExists(atPath: stateFile.path) { try? FileManager.default.removeItem(at: stateFile) }
        hashedOffset = 0
        checkpointOffset = 0
        try? reader?.close()
        reader = nil
        if let expectation {
            hash = StreamingHash(expectation.algorithm)
        } else if hashesByDefault {
            hash = StreamingHash(DigestHeaders.preferred(announced)?.algorithm ?? .md5)
        } else {
            hash = nil
        }
    }

    func saveCheckpoint(segments: [Range<Int64>]?) {
        guard failure == nil else { return }
        do throws(DownloadError) {
            try checkpoint(described, segments: segments)
        } catch {
            fail(error)
        }
    }

    // MARK: - Before the first command, or drained

    /// Continues from a partial file of `length` bytes whose first `length` bytes `hash` covers.
    func resume(at length: Int64, hash: StreamingHash?) {
        self.hash = hash
        offset = length
        hashedOffset = length
    }

    /// Closes the partial file (it is reopened by the next write).
    func closeFile() {
        writer?.close()
        writer = nil
        positional?.close()
        positional = nil
    }

    /// Closes the writer and deletes the partial file and its saved state: nothing of this download is kept.
    func discardFiles() {
        closeFile()
        try? FileManager.default.removeItem(at: partialFile)
        try? FileManager.default.removeItem(at: stateFile)
    }

    /// The state to save beside the partial file.
    /// - Parameters:
    ///   - metadata: the resource's version.
    ///   - segments: the ranges written after the hashed bytes, for a file fetched in segments.
    func partialState(_ metadata: ResourceMetadata, segments: [Range<Int64>]?) -> PartialState {
        // Without a hash the state claims no hashed bytes (a later hashed resume re-hashes the file from byte 0);
        // for a file in segments, the ranges written from byte 0 are then all it keeps.
        var segments = segments
        if hash == nil, segments != nil, hashedOffset > 0 { segments = [0..<hashedOffset] + segments! }
        return PartialState(
            url: url, hashedLength: hash != nil ? hashedOffset : 0, hash: hash,
            validators: metadata.validators, totalLength: metadata.totalLength,
            rangesSupported: metadata.rangesSupported, suggestedFilename: metadata.suggestedFilename,
            announced: metadata.announced, restartedAfterMismatch: metadata.restartedAfterMismatch, segments: segments)
    }

    /// Saves the state atomically (hash queue with the disk's snapshot of `segmentsToSave`, or drained).
    func checkpoint(_ metadata: ResourceMetadata, segments: [Range<Int64>]?) throws(DownloadError) {
        try partialState(metadata, segments: segments).save(to: stateFile)
        checkpointOffset = hashedOffset
        described = metadata
    }
}
