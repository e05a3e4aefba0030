import Foundation

/// Appends bytes to a file through `OutputStream`, looping on short writes and turning stream errors into
/// `DownloadError` (never a trap).
///
/// Not thread-safe, like `OutputStream` itself: a writer is confined to the one serial queue that uses it.
final class FileWriter {
    let fileURL: URL
    private let stream: OutputStream
    private(set) var bytesWritten: Int64 = 0
    private var isOpen = true

    /// Opens a file for appending, creating it if needed.
    /// - Parameters:
    ///   - fileURL: the file.
    ///   - truncate: empty the file first.
    ///   - downloadURL: the download this file belongs to, for error messages.
    /// - Throws: `DownloadError.fileSystem` when the file cannot be opened.
    init(fileURL: URL, truncate: Bool, downloadURL: URL) throws(DownloadError) {
        self.fileURL = fileURL
        guard let stream = OutputStream(url: fileURL, append: !truncate) else {
            throw .fileSystem(downloadURL, reason: "cannot open \(fileURL.path) for writing")
        }
        stream.open()
        if stream.streamStatus == .error {
            let underlying = stream.streamError
            throw .fileSystem(
                downloadURL,
                reason: "cannot open \(fileURL.path): \(underlying?.localizedDescription ?? "unknown error")",
                underlying: underlying.map { SavedError(description: "\($0)") })
        }
        self.stream = stream
    }

    deinit {
        if isOpen { stream.close() }
    }

    /// Writes every byte of `buffer`.
    /// - Parameters:
    ///   - buffer: the bytes; an empty buffer writes nothing (a zero-length write would end the stream).
    ///   - downloadURL: for error messages.
    /// - Throws: `DownloadError.fileSystem` on a write error (disk full, I/O error, …).
    func write(_ buffer: UnsafeRawBufferPointer, downloadURL: URL) throws(DownloadError) {
        guard var pointer = buffer.baseAddress?.assumingMemoryBound(to: UInt8.self), buffer.count > 0 else { return }
        var remaining = buffer.count
        while remaining > 0 {
            let written = stream.write(pointer, maxLength: remaining)
            if written <= 0 {
                // Read streamError only in the error state: it force-unwraps otherwise.
                let underlying = stream.streamStatus == .error ? stream.streamError : nil
                let reason = underlying.map { "\($0.localizedDescription)" } ?? "the stream accepted no bytes"
                throw .fileSystem(
                    downloadURL, reason: "writing \(fileURL.lastPathComponent) failed: \(reason)",
                    underlying: underlying.map { SavedError(description: "\($0)") })
            }
            pointer += written
            remaining -= written
            bytesWritten += Int64(written)
        }
    }

    /// Closes the stream. Idempotent.
    func close() {
        guard isOpen else { return }
        isOpen = false
        stream.close()
    }
}
