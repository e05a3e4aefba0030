import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The partial file before the pipeline's first command, or once drained (`Transfer.run()` owns the pipeline then), and the
/// room it needs (checked on the disk queue).
extension DiskPipeline {
    /// Continues from a partial file of `length` bytes whose first `length` bytes `hash` covers.
    func resume(at length: Int64, hash: StreamingHash?) {
        self.hash = hash
        offset = length
        hashedOffset = length
    }

    /// Closes the partial file's writers (the next write opens it again).
    func closeFile() {
        writer?.close()
        writer = nil
        positional?.close()
        positional = nil
    }

    /// Closes the writers and deletes the partial file and its saved state: nothing of this download is kept.
    func discardFiles() {
        closeFile()
        closeReader()
        files.removePartial()
        files.removeState()
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
    }

    /// Fails the pipeline at once when the partial file's file system has less room than the bytes still to come (disk
    /// queue, when the length is first known): a clear error before the download, not `ENOSPC` at its end. Bytes
    /// already on disk (the watermark and the segments after it) are not counted again.
    func checkFreeSpace(total: Int64?) {
        guard !checkedFreeSpace, let total, failure == nil else { return }
        checkedFreeSpace = true
        let present = offset + beyond.reduce(0) { $0 + Int64($1.count) }
        let needed = total - present
        guard needed > 0, let free = FileManager.default.freeSpace(at: files.partialURL.deletingLastPathComponent())
        else { return }
        guard free < needed else { return }
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
