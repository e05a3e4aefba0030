import Foundation

/// The mutable state of one transfer: the partial file's writer, the running hash and what is known of the
/// resource.
///
/// Ownership: between requests only `Transfer.run()` touches it. While a request runs, the file, the hash and the
/// byte counts belong to the job's serial `disk` queue, which writes and hashes batches handed over by the sink on
/// the delegate queue; the sink drains `disk` before its request ends, and the request's completion hands everything
/// back to `run()`.
final class TransferJob: @unchecked Sendable {
    let url: URL
    let partialFile: URL
    let stateFile: URL
    /// Whether bytes are hashed; without hashing the saved state claims no hashed bytes, so that a later hashed
    /// resume re-hashes the file from byte 0.
    let hashing: Bool
    /// Writes and hashes in parallel with the network: the delegate queue only batches bytes.
    let disk = DispatchQueue(label: "Downloader.TransferJob.disk")
    var writer: FileWriter?
    var md5 = MD5()
    /// Bytes in the partial file (and hashed).
    var offset: Int64 = 0
    var validators = Validators()
    var totalLength: Int64?
    var rangesSupported = true
    var suggestedFilename: String?
    var announcedMD5: MD5Digest?
    var restartedAfterMismatch = false
    /// Bytes received from the network by this run (not counting what was already on disk).
    var receivedThisRun: Int64 = 0
    /// Offset at the last saved checkpoint.
    var checkpointOffset: Int64 = 0
    /// The first write or checkpoint error on the disk queue; the sink fails the request when it sees one.
    let diskError = Locked<DownloadError?>(nil)

    init(url: URL, partialFile: URL, stateFile: URL, hashing: Bool = true) {
        self.hashing = hashing
        self.url = url
        self.partialFile = partialFile
        self.stateFile = stateFile
    }

    /// Opens the partial file for appending if it is not open yet.
    func openWriter() throws(DownloadError) {
        if writer == nil { writer = try FileWriter(fileURL: partialFile, truncate: false, downloadURL: url) }
    }

    /// Empties the partial file and the hash: the next byte written is byte 0.
    func truncate() throws(DownloadError) {
        writer?.close()
        writer = try FileWriter(fileURL: partialFile, truncate: true, downloadURL: url)
        md5 = MD5()
        offset = 0
        checkpointOffset = 0
    }

    /// Appends bytes to the file, then to the hash (so the hash never covers bytes that failed to be written).
    func append(_ buffer: UnsafeRawBufferPointer) throws(DownloadError) {
        try openWriter()
        try writer!.write(buffer, downloadURL: url)
        if hashing { md5.update(bufferPointer: buffer) }
        offset += Int64(buffer.count)
        receivedThisRun += Int64(buffer.count)
    }

    /// The state to save beside the partial file.
    var partialState: PartialState {
        PartialState(
            url: url, hashedLength: hashing ? offset : 0, md5: hashing ? md5 : MD5(), validators: validators, totalLength: totalLength,
            rangesSupported: rangesSupported, suggestedFilename: suggestedFilename,
            announcedMD5: announcedMD5?.hexString, restartedAfterMismatch: restartedAfterMismatch)
    }

    /// Saves the state atomically.
    func checkpoint() throws(DownloadError) {
        try partialState.save(to: stateFile)
        checkpointOffset = offset
    }
}
