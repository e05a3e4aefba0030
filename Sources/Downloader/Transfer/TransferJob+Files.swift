import Foundation

/// The partial file before the job's first command, or once drained (`Transfer.run()` owns the job then), and the
/// room it needs (checked on the disk queue).
extension TransferJob {
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

    /// Fails the job at once when the partial file's file system has less room than the bytes still to come (disk
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
        let format = ByteCountFormatter()
        format.countStyle = .binary
        fail(
            .fileSystem(
                url,
                reason: "not enough free space: \(format.string(fromByteCount: needed)) still to come, "
                    + "\(format.string(fromByteCount: free)) free on the disk of \(files.partialURL.path)"))
    }
}
