import Foundation

/// The partial file before the job's first command, or once drained (`Transfer.run()` owns the job then).
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
}
