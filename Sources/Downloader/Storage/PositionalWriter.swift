import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes bytes at given offsets of a file (`pwrite(2)`), for a download fetched in segments; the sequential
/// `FileWriter` appends instead. Not thread-safe: confined to one serial queue.
final class PositionalWriter {
    let fileURL: URL
    private var descriptor: Int32

    /// Opens a file for writing, creating it (mode 0600) if needed; nothing is truncated.
    /// - Throws: `DownloadError.fileSystem` when the file cannot be opened.
    init(fileURL: URL, downloadURL: URL) throws(DownloadError) {
        self.fileURL = fileURL
        descriptor = open(fileURL.path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw .fileSystem(
                downloadURL, reason: "cannot open \(fileURL.path): \(String(cString: strerror(errno)))")
        }
    }

    deinit {
        close()
    }

    /// Writes every byte of `buffer` at `offset`.
    /// - Throws: `DownloadError.fileSystem` on a write error (disk full, I/O error, …).
    func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64, downloadURL: URL) throws(DownloadError) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        var done = 0
        while done < buffer.count {
            let written = pwrite(descriptor, base + done, buffer.count - done, off_t(offset) + off_t(done))
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else {
                let reason = written < 0 ? String(cString: strerror(errno)) : "no bytes accepted"
                throw .fileSystem(downloadURL, reason: "writing \(fileURL.lastPathComponent) failed: \(reason)")
            }
            done += written
        }
    }

    /// Closes the file. Idempotent.
    func close() {
        guard descriptor >= 0 else { return }
        closeDescriptor(descriptor)
        descriptor = -1
    }
}

/// `close(2)`, which the writer's own `close()` hides.
private func closeDescriptor(_ descriptor: Int32) {
    _ = close(descriptor)
}
