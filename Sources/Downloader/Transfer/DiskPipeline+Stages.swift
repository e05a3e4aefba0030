import Foundation

#if canImport(Glibc)
    import Glibc
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What each stage of a `DiskPipeline` owns, as types: the disk queue's `DiskStage` and the hash queue's `HashStage`,
/// each in a `QueueOwned` box (checked in debug builds). The shorthands below forward to them, so the stages' code
/// reads like plain fields while every access goes through its owner's box.
extension DiskPipeline {
    /// The disk queue's state (or the transfer's, when the pipeline is handed over).
    struct DiskStage {
        /// Appends to the partial file.
        var writer: FileWriter?
        /// Bytes in the partial file from byte 0 without a gap (the watermark).
        var offset: Int64 = 0
        /// Segmented: the writer at offsets, and the ranges written after `offset` (sorted, disjoint, not touching it).
        var positional: FileWriter?
        var beyond: [Range<Int64>] = []
        /// Whether the file is written in segments (its saved state lists them).
        var segmented = false
        /// Bytes written at offsets since the last checkpoint was queued.
        var segmentBytesSinceCheckpoint: Int64 = 0
        /// Bytes received from the network by this run and written (not counting what was already on disk).
        var receivedThisRun: Int64 = 0
        /// Whether the free space was compared with the bytes still to come (`checkFreeSpace`).
        var checkedFreeSpace = false
        /// Whether the partial file's room was reserved (`reserveSpace`).
        var reservedSpace = false
        /// The total length the last described metadata gives (for progress).
        var total: Int64?
        /// The partial file is the new empty one `emptyFile()` made, nothing written to it since: starting over again
        /// (the first response of a fresh download does) need not make another (issue #52: five system calls a file).
        var isFreshlyEmptied = false
        /// When the file's new bytes are handed to the drive (`handOver(written:)`).
        var writeBehind = WriteBehind()
    }

    /// The hash queue's state (or the transfer's, when the pipeline is handed over).
    struct HashStage {
        /// The running hash; `nil` without hashing.
        var hash: StreamingHash?
        /// Bytes covered by `hash` (or that would be, without hashing); never more than `offset`.
        var hashedOffset: Int64 = 0
        /// What checkpoints save, and how often a streamed body saves one.
        var described = ResourceMetadata()
        var checkpointEvery: Int64?
        /// `hashedOffset` at the last saved checkpoint.
        var checkpointOffset: Int64 = 0
        /// The partial file opened for reading back (bytes written out of order, or beyond the backlog) and syncing.
        var reader: Int32 = -1
    }

    // Disk stage.
    var writer: FileWriter? {
        _read { yield diskStage.value.writer }
        _modify { yield &diskStage.value.writer }
    }
    var offset: Int64 {
        _read { yield diskStage.value.offset }
        _modify { yield &diskStage.value.offset }
    }
    var positional: FileWriter? {
        _read { yield diskStage.value.positional }
        _modify { yield &diskStage.value.positional }
    }
    var beyond: [Range<Int64>] {
        _read { yield diskStage.value.beyond }
        _modify { yield &diskStage.value.beyond }
    }
    var segmented: Bool {
        _read { yield diskStage.value.segmented }
        _modify { yield &diskStage.value.segmented }
    }
    var isFreshlyEmptied: Bool {
        _read { yield diskStage.value.isFreshlyEmptied }
        _modify { yield &diskStage.value.isFreshlyEmptied }
    }
    var writeBehind: WriteBehind {
        _read { yield diskStage.value.writeBehind }
        _modify { yield &diskStage.value.writeBehind }
    }
    var segmentBytesSinceCheckpoint: Int64 {
        _read { yield diskStage.value.segmentBytesSinceCheckpoint }
        _modify { yield &diskStage.value.segmentBytesSinceCheckpoint }
    }
    var receivedThisRun: Int64 {
        _read { yield diskStage.value.receivedThisRun }
        _modify { yield &diskStage.value.receivedThisRun }
    }
    var checkedFreeSpace: Bool {
        _read { yield diskStage.value.checkedFreeSpace }
        _modify { yield &diskStage.value.checkedFreeSpace }
    }
    var reservedSpace: Bool {
        _read { yield diskStage.value.reservedSpace }
        _modify { yield &diskStage.value.reservedSpace }
    }
    var total: Int64? {
        _read { yield diskStage.value.total }
        _modify { yield &diskStage.value.total }
    }

    // Hash stage.
    var hash: StreamingHash? {
        _read { yield hashStage.value.hash }
        _modify { yield &hashStage.value.hash }
    }
    var hashedOffset: Int64 {
        _read { yield hashStage.value.hashedOffset }
        _modify { yield &hashStage.value.hashedOffset }
    }
    var described: ResourceMetadata {
        _read { yield hashStage.value.described }
        _modify { yield &hashStage.value.described }
    }
    var checkpointEvery: Int64? {
        _read { yield hashStage.value.checkpointEvery }
        _modify { yield &hashStage.value.checkpointEvery }
    }
    var checkpointOffset: Int64 {
        _read { yield hashStage.value.checkpointOffset }
        _modify { yield &hashStage.value.checkpointOffset }
    }
    var reader: Int32 {
        _read { yield hashStage.value.reader }
        _modify { yield &hashStage.value.reader }
    }
}

/// The partial file before the pipeline's first command, or once drained (`Transfer.run()` owns the pipeline then), and the
/// room it needs (checked on the disk queue).
extension DiskPipeline {
    /// Continues from a partial file of `length` bytes whose first `length` bytes `hash` covers.
    func resume(at length: Int64, hash: StreamingHash?) {
        isFreshlyEmptied = false
        self.hash = hash
        offset = length
        hashedOffset = length
    }

    /// Closes the partial file's writers (the next write opens it again).
    func closeFile() {
        isFreshlyEmptied = false
        writer?.close()
        writer = nil
        positional?.close()
        positional = nil
    }

    /// Runs `body` with a descriptor of the partial file (drained): a writer's, while one is open, else one opened
    /// for reading and closed after (the writer's saves an `openat` and a `close` a file, issue #52). Nothing runs
    /// when the file cannot be opened.
    func withPartialFile(_ body: (Int32) -> Void) {
        if let fd = writer?.openDescriptor ?? positional?.openDescriptor { return body(fd) }
        guard let fd = try? files.openPartial(.read) else { return }
        defer { _ = closeDescriptor(fd) }
        body(fd)
    }

    /// Closes the writers and deletes the partial file and its saved state: nothing of this download is kept.
    func discardFiles() {
        closeFile()
        closeReader()
        files.removePartial()
        files.removeState()
        shared.withLock { $0.stateMayExist = false }
    }

    /// Gives up the partial file of a body no later request can continue (the server ignores Range: the next request
    /// streams the whole file from byte 0 whatever is on disk). What still waits to be written, hashed or synced is
    /// dropped rather than carried out, so a stop takes no longer than the writes already under way however far the
    /// disk or the hash fell behind a fast body; the bytes are deleted unsynced; a state without bytes stays, saying
    /// what the server is (`DownloadManager.savedDownloads`: "not resumable").
    /// - Parameter metadata: the resource as the last response described it.
    func abandon(_ metadata: ResourceMetadata) async {
        shared.withLock { $0.abandoned = true }
        await drained()
        discardFiles()
        let state = PartialState(
            url: url, hashedLength: 0, hash: nil, validators: metadata.validators, totalLength: metadata.totalLength,
            rangesSupported: false, suggestedFilename: metadata.suggestedFilename, announced: metadata.announced,
            restartedAfterMismatch: metadata.restartedAfterMismatch, ignoresETag: metadata.ignoresETag, segments: nil,
            file: nil, boot: Boot.identifier)
        try? files.saveState(state)
        shared.withLock { $0.stateMayExist = true }
    }

    /// Fails the pipeline at once when the partial file's file system has less room than the bytes still to come (disk
    /// queue, when the length is first known): a clear error before the download, not `ENOSPC` at its end. Bytes
    /// already on disk (the watermark and the segments after it) are not counted again.
    func checkFreeSpace(total: Int64?) {
        guard !checkedFreeSpace, let total, failure == nil else { return }
        checkedFreeSpace = true
        let present = offset + beyond.reduce(0) { $0 + Int64($1.count) }
        let needed = total - present
        guard needed > 0, let free = files.folder.freeBytesIfShort(of: needed, in: .partial) else { return }
        fail(
            .fileSystem(
                url,
                reason: "not enough free space: \(ByteSize.text(needed)) still to come, "
                    + "\(ByteSize.text(free)) free on the disk of \(files.partialURL.path)"))
    }

    /// Reserves the partial file's blocks for `total` bytes (`FileAllocation`; disk queue, once the length is known)
    /// without changing its length. A file system that cannot is left as it is.
    func reserveSpace(total: Int64?) {
        guard allocation != .none, !reservedSpace, let total, total > 0, failure == nil, files.partialSize != nil
        else { return }
        reservedSpace = true
        #if os(Linux)
            guard let fallocate = Self.fallocate, let fd = try? files.openPartial(.positional) else { return }
            _ = fallocate(fd, 1 /* FALLOC_FL_KEEP_SIZE */, 0, Int64(total))
            _ = closeDescriptor(fd)
        #elseif canImport(Darwin)
            // F_PREALLOCATE from the physical end of file, the length unchanged; contiguous first, then any blocks.
            let missing = total - (files.partialSize ?? 0)
            guard missing > 0, let fd = try? files.openPartial(.positional) else { return }
            var store = fstore_t(
                fst_flags: UInt32(F_ALLOCATECONTIG), fst_posmode: F_PEOFPOSMODE, fst_offset: 0,
                fst_length: off_t(missing), fst_bytesalloc: 0)
            if fcntl(fd, F_PREALLOCATE, &store) == -1 {
                store.fst_flags = UInt32(F_ALLOCATEALL)
                _ = fcntl(fd, F_PREALLOCATE, &store)
            }
            _ = closeDescriptor(fd)
        #endif
    }

    #if os(Linux)
        /// glibc's `fallocate(2)` (a GNU extension Swift's Glibc module does not import), found at run time.
        static let fallocate: (@convention(c) (Int32, Int32, Int64, Int64) -> Int32)? = dlsym(nil, "fallocate64")
            .map { unsafeBitCast($0, to: (@convention(c) (Int32, Int32, Int64, Int64) -> Int32).self) }
    #endif
}

/// Positional writes for a download fetched in segments: the watermark (the bytes from 0 without a gap) and hashing
/// in order as it rises, so the digest is ready when the last segment lands.
extension DiskPipeline {
    /// The ranges a checkpoint lists (disk queue, or drained): those written after the watermark, when segmented.
    var segmentsToSave: [Range<Int64>]? { segmented ? beyond : nil }

    /// Writes bytes at an offset and raises the watermark over every range that now joins it (disk queue).
    func write(_ data: Data, at start: Int64) {
        guard failure == nil, !data.isEmpty else { return }
        isFreshlyEmptied = false
        let range = start..<(start + Int64(data.count))
        do throws(DownloadError) {
            if positional == nil {
                writer?.close()  // bytes so far were appended; from now on every byte is written at its offset
                writer = nil
                positional = FileWriter(descriptor: try files.openPartial(.positional), fileName: files.partialName)
            }
            try Self.withBytes(of: data) { (buffer) throws(DownloadError) in
                try positional!.write(buffer, at: start, downloadURL: url)
            }
        } catch {
            fail(error)
            return
        }
        segmented = true
        writeBehind.isOn = true  // segments are ranged: the network side waits for the disk
        handOver(written: Int64(data.count))
        receivedThisRun += Int64(data.count)
        insert(range)
        segmentBytesSinceCheckpoint += Int64(data.count)
        let before = offset
        while let first = beyond.first, first.lowerBound <= offset {
            offset = max(offset, first.upperBound)
            beyond.removeFirst()
        }
        if offset > before {
            let to = offset
            // The new bytes from the old watermark are in memory when this write starts there; the rest is read back.
            let memory = range.lowerBound == before ? data : Data()
            toHasher(hashing: to - before) { [self] in hashRange(from: before, to: to, memory: memory) }
        }
        // Bytes after the watermark survive a crash only once a saved state lists them: save often, so a `kill -9`
        // refetches at most this much besides what was in flight.
        if segmentBytesSinceCheckpoint >= Self.segmentCheckpointInterval {
            segmentBytesSinceCheckpoint = 0
            let segments = beyond
            toHasher { [self] in saveCheckpoint(segments: segments) }
        }
    }

    /// Before the first byte is written at an offset: the saved state lists the segments (none yet), so that from now
    /// on a crash never leaves a state whose restore takes the bytes after the hashed ones for a contiguous prefix —
    /// the file then has holes where segments had not arrived (found by the chaos run: a wrong file, exit 0). Drained:
    /// the caller owns the pipeline.
    func beginSegments(_ metadata: ResourceMetadata) throws(DownloadError) {
        guard !segmented else { return }
        segmented = true
        try checkpoint(metadata, segments: beyond)
    }

    /// How many bytes written at offsets a saved state may miss.
    static let segmentCheckpointInterval: Int64 = 1 << 20

    /// Adds a written range to `beyond`, merging it with the ranges it touches.
    private func insert(_ range: Range<Int64>) {
        var merged = range
        var kept: [Range<Int64>] = []
        kept.reserveCapacity(beyond.count + 1)
        for existing in beyond {
            if existing.upperBound < merged.lowerBound || existing.lowerBound > merged.upperBound {
                kept.append(existing)
            } else {
                merged = min(existing.lowerBound, merged.lowerBound)..<max(existing.upperBound, merged.upperBound)
            }
        }
        let index = kept.firstIndex { $0.lowerBound > merged.lowerBound } ?? kept.endIndex
        kept.insert(merged, at: index)
        beyond = kept
    }

    /// Continues a file fetched in segments (before the first command): `hash` covers the first `length` bytes and
    /// `written` lists the ranges on disk after them.
    func resume(at length: Int64, hash: StreamingHash?, written: [Range<Int64>]) {
        resume(at: length, hash: hash)
        beyond = written
        segmented = true
    }
}

/// Written bytes on their way to the hasher, in file order.
enum HashPiece: Sendable {
    /// Bytes still in memory.
    case bytes(Data)
    /// This many bytes, read back from the file (the hasher's backlog was full when they were written).
    case fromFile(Int64)
}

/// The hash stage: the running hash, the saved state, and reading back what is not in memory.
extension DiskPipeline {
    /// Hashes written pieces in order and saves a checkpoint when one is due (hash queue).
    func hash(_ pieces: [HashPiece]) {
        for piece in pieces {
            yieldToWrites()
            switch piece {
            case .bytes(let chunk):
                if hash != nil { chunk.withUnsafeBytes { hash!.update(bufferPointer: $0) } }
                hashedOffset += Int64(chunk.count)
                shared.withLock {
                    $0.hashBacklog -= Int64(chunk.count)
                    $0.changeBuffered(by: -Int64(chunk.count))
                }
            case .fromFile(let count):
                guard failure == nil, !isAbandoned else { return }
                hashRange(from: hashedOffset, to: hashedOffset + count, memory: Data())
            }
        }
        if let checkpointEvery, hashedOffset - checkpointOffset >= checkpointEvery { saveCheckpoint(segments: nil) }
    }

    /// Waits while more than `hashYieldThreshold` bytes wait to be written, for at most a quarter of a second at a
    /// time (hash queue): the writer goes first. Bounded, so that the disk queue, which sometimes waits for the hasher
    /// (`startOver`), never waits long; a disk that cannot keep up ends its request by the network side's cap.
    func yieldToWrites() {
        // Work run on the disk queue's thread (`toHasher`) would wait for itself.
        guard shared.withLock({ !$0.hashingInline && $0.unwritten > hashYieldThreshold }) else { return }
        let deadline = Date(timeIntervalSinceNow: 0.25)
        writesProgressed.lock()
        defer { writesProgressed.unlock() }
        while unwrittenBytes > hashYieldThreshold, Date() < deadline {
            _ = writesProgressed.wait(until: min(deadline, Date(timeIntervalSinceNow: 0.01)))
        }
    }

    /// Hashes bytes `from..<to` (hash queue): first from `memory` (which starts at `from`), then from the file.
    func hashRange(from: Int64, to: Int64, memory: Data) {
        guard failure == nil else { return }
        guard from == hashedOffset else {
            fail(.fileSystem(url, reason: "internal: hashing from \(from), the hash covers \(hashedOffset) bytes"))
            return
        }
        let fromMemory = min(Int64(memory.count), to - from)
        if fromMemory > 0, hash != nil {
            memory.prefix(Int(fromMemory)).withUnsafeBytes { hash!.update(bufferPointer: $0) }
        }
        if from + fromMemory < to && hash != nil {
            do throws(DownloadError) {
                try openReader()
                try FileReader.read(reader, from: from + fromMemory, to: to, file: files.partialURL, url: url) {
                    bytes in
                    hash!.update(bufferPointer: bytes)
                    yieldToWrites()  // a long read-back lets the writer go first between its 1 MiB reads
                }
            } catch {
                fail(error)
                return
            }
        }
        hashedOffset = to
    }

    /// Hashes what was written but not hashed when a failure stopped the hasher (drained): a full disk stops the
    /// writes, but the bytes already in the file can still be read, and a saved state then counts them (a rerun
    /// fetches only the rest). A read error leaves the hash where it was.
    func catchUpAfterFailure() {
        guard hashedOffset < offset else { return }
        let from = hashedOffset
        do throws(DownloadError) {
            try openReader()
            var copy = hash
            try FileReader.read(reader, from: from, to: offset, file: files.partialURL, url: url) { bytes in
                copy?.update(bufferPointer: bytes)
            }
            hash = copy
            hashedOffset = offset
        } catch {
            return
        }
    }

    /// Opens the partial file for reading back and syncing, if it is not open (hash queue, or drained).
    func openReader() throws(DownloadError) {
        if reader < 0 { reader = try files.openPartial(.read) }
    }

    func closeReader() {
        if reader >= 0 { _ = closeDescriptor(reader) }
        reader = -1
    }

    /// Forgets the hash and the saved state (they described other bytes) and chooses the hash for a new file.
    func resetHash(announced: [Checksum]) {
        durable.sync {}  // a state still being saved would describe the old bytes
        removeSavedState()
        hashedOffset = 0
        checkpointOffset = 0
        closeReader()
        if let expectation {
            hash = StreamingHash(expectation.algorithm)
        } else if hashesByDefault {
            hash = StreamingHash(DigestHeaders.preferred(announced)?.algorithm ?? .md5)
        } else {
            hash = nil
        }
    }

    /// Saves a checkpoint from the hash queue without waiting for the disk: the state is built now, with the file's
    /// identity as it is now, and saved on the durable queue once the file is synced (the sync of one window
    /// overlaps hashing and receiving the next; states are saved in order).
    func saveCheckpoint(segments: [Range<Int64>]?) {
        guard failure == nil, !isAbandoned else { return }
        let synced: Int32
        let state: PartialState
        do throws(DownloadError) {
            (synced, state) = try prepareCheckpoint(described, segments: segments)
        } catch {
            fail(error)
            return
        }
        checkpointOffset = hashedOffset
        shared.withLock { $0.durableUsed = true }
        durable.async { [self] in
            guard failure == nil, !isAbandoned else { return closeSynced(synced) }
            do throws(DownloadError) {
                try finishCheckpoint(state, synced: synced)
            } catch {
                fail(error)
            }
        }
    }

    /// The state to save beside the partial file.
    /// - Parameters:
    ///   - metadata: the resource's version.
    ///   - segments: the ranges written after the hashed bytes, for a file fetched in segments.
    ///   - file: the partial file's identity when the state is saved.
    func partialState(
        _ metadata: ResourceMetadata, segments: [Range<Int64>]?, file: FileIdentity? = nil
    ) -> PartialState {
        // Without a hash the state claims no hashed bytes (a later hashed resume re-hashes the file from byte 0);
        // for a file in segments, the ranges written from byte 0 are then all it keeps.
        var segments = segments
        if hash == nil, segments != nil, hashedOffset > 0 { segments = [0..<hashedOffset] + segments! }
        return PartialState(
            url: url, hashedLength: hash != nil ? hashedOffset : 0, hash: hash,
            validators: metadata.validators, totalLength: metadata.totalLength,
            rangesSupported: metadata.rangesSupported, suggestedFilename: metadata.suggestedFilename,
            announced: metadata.announced, restartedAfterMismatch: metadata.restartedAfterMismatch,
            ignoresETag: metadata.ignoresETag, segments: segments, file: file, boot: Boot.identifier)
    }

    /// Saves the state atomically once the bytes it counts are durable (drained: waits for the durable queue
    /// first, so that states are saved in order).
    func checkpoint(_ metadata: ResourceMetadata, segments: [Range<Int64>]?) throws(DownloadError) {
        durable.sync {}
        let (synced, state) = try prepareCheckpoint(metadata, segments: segments)
        checkpointOffset = hashedOffset
        described = metadata
        try finishCheckpoint(state, synced: synced)
    }

    /// Builds the state a checkpoint saves, with the partial file's identity taken now, and a descriptor of the file
    /// to sync before the state is saved (-1 when there is no file yet: a state of zero bytes needs no sync).
    ///
    /// The identity is taken before the sync: every byte it covers (and so every byte the state counts) is on stable
    /// storage before the state is written.
    private func prepareCheckpoint(
        _ metadata: ResourceMetadata, segments: [Range<Int64>]?
    ) throws(DownloadError) -> (synced: Int32, state: PartialState) {
        if reader < 0 && hashedOffset == 0 && files.partialSize == nil {
            return (-1, partialState(metadata, segments: segments, file: nil))
        }
        try openReader()
        let identity = FileIdentity(descriptor: reader)
        let synced = dup(reader)
        guard synced >= 0 else {
            throw .fileSystem(
                url, reason: "cannot sync \(files.partialName): \(POSIXError.current.localizedDescription)")
        }
        return (synced, partialState(metadata, segments: segments, file: identity))
    }

    /// Syncs the partial file through `synced` (then closes it) and saves `state` (durable queue, or drained).
    private func finishCheckpoint(_ state: PartialState, synced: Int32) throws(DownloadError) {
        if synced >= 0 {
            let result = syncData(synced)
            let reason = result == 0 ? nil : POSIXError.current.localizedDescription
            closeSynced(synced)
            if let reason { throw .fileSystem(url, reason: "cannot sync \(files.partialName): \(reason)") }
        }
        willSave?(state.hashedLength, state.file?.size ?? 0)
        defer { shared.withLock { $0.stateMayExist = true } }  // after: a deletion racing it is then ordered first
        try files.saveState(state)
    }

    private func closeSynced(_ synced: Int32) {
        if synced >= 0 { _ = closeDescriptor(synced) }
    }
}
