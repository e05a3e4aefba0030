import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

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
        guard unwrittenBytes > hashYieldThreshold else { return }
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
        files.removeState()
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
        try files.saveState(state)
    }

    private func closeSynced(_ synced: Int32) {
        if synced >= 0 { _ = closeDescriptor(synced) }
    }
}
