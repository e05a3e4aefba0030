import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes bytes to an open file — appended (`write(2)` on a descriptor opened with `O_APPEND`) or at offsets
/// (`pwrite(2)`, for a download fetched in segments) — looping on short writes and `EINTR`, and turning errors into
/// `DownloadError` (never a trap).
///
/// It writes through a descriptor that `PartialFiles` opened relative to the state folder: an `OutputStream` can only
/// open a path, which would follow a symbolic link planted in the file's place. Not thread-safe: confined to the one
/// serial queue that uses it.
final class FileWriter {
    /// The file's name, for messages (a name, not a URL: building the URL cost 15,000 instructions a file, #52).
    let fileName: String
    private var descriptor: Int32

    /// Takes over an open descriptor (closed by `close()` or when the writer goes).
    init(descriptor: Int32, fileName: String) {
        self.descriptor = descriptor
        self.fileName = fileName
    }

    deinit {
        close()
    }

    /// The open descriptor, for calls on the file itself (`fstat`, `fsetxattr`); `nil` once closed.
    var openDescriptor: Int32? { descriptor >= 0 ? descriptor : nil }

    /// Writes every byte of `buffer`, appended (`offset` nil) or at `offset`.
    /// - Throws: `DownloadError.fileSystem` on a write error (disk full, I/O error, …).
    func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64? = nil, downloadURL: URL) throws(DownloadError) {
        guard let base = buffer.baseAddress, buffer.count > 0, descriptor >= 0 else { return }
        var done = 0
        while done < buffer.count {
            let written =
                if let offset {
                    pwrite(descriptor, base + done, buffer.count - done, off_t(offset) + off_t(done))
                } else {
                    posixWrite(descriptor, base + done, buffer.count - done)
                }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else {
                let reason = written < 0 ? POSIXError.current.localizedDescription : "no bytes accepted"
                throw .fileSystem(
                    downloadURL, reason: "writing \(fileName) failed: \(reason)",
                    underlying: written < 0 ? POSIXError.current : nil)
            }
            done += written
        }
    }

    /// Appends chunks with as few system calls as possible (`writev(2)`, up to 1024 chunks at a time).
    /// - Returns: how many bytes were written, all of them unless `failure` is set (then the bytes before it were).
    func append(_ chunks: [Data], downloadURL: URL) -> (written: Int64, failure: DownloadError?) {
        var written: Int64 = 0
        var start = 0
        while start < chunks.count {
            let end = min(chunks.count, start + Self.maximumChunksPerCall)
            var vectors: [iovec] = []
            vectors.reserveCapacity(end - start)
            let outcome = Self.withPinned(chunks[start..<end], &vectors) { vectors in
                writeAll(vectors, downloadURL: downloadURL)
            }
            written += outcome.written
            if let failure = outcome.failure { return (written, failure) }
            start = end
        }
        return (written, nil)
    }

    /// The most chunks one `writev(2)` takes (`IOV_MAX` on Linux and macOS).
    static let maximumChunksPerCall = 1024

    /// Runs `body` with the chunks' bytes pinned as `iovec`s.
    private static func withPinned<Result>(
        _ chunks: ArraySlice<Data>, _ vectors: inout [iovec], _ body: ([iovec]) -> Result
    ) -> Result {
        guard let first = chunks.first else { return body(vectors) }
        return first.withUnsafeBytes { buffer in
            vectors.append(
                iovec(iov_base: UnsafeMutableRawPointer(mutating: buffer.baseAddress), iov_len: buffer.count))
            return withPinned(chunks.dropFirst(), &vectors, body)
        }
    }

    /// Writes every byte the vectors describe, looping on short writes and `EINTR`.
    private func writeAll(_ vectors: [iovec], downloadURL: URL) -> (written: Int64, failure: DownloadError?) {
        var vectors = vectors.filter { $0.iov_len > 0 }
        var index = 0
        var written: Int64 = 0
        while index < vectors.count {
            let count = vectors[index...].withUnsafeBufferPointer { buffer in
                writev(descriptor, buffer.baseAddress, Int32(buffer.count))
            }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                let reason = count < 0 ? POSIXError.current.localizedDescription : "no bytes accepted"
                return (
                    written,
                    .fileSystem(
                        downloadURL, reason: "writing \(fileName) failed: \(reason)",
                        underlying: count < 0 ? POSIXError.current : nil)
                )
            }
            written += Int64(count)
            var left = count
            while left > 0 && index < vectors.count {
                if left >= vectors[index].iov_len {
                    left -= vectors[index].iov_len
                    index += 1
                } else {
                    vectors[index].iov_base += left
                    vectors[index].iov_len -= left
                    left = 0
                }
            }
        }
        return (written, nil)
    }

    /// Closes the file. Idempotent.
    func close() {
        guard descriptor >= 0 else { return }
        _ = closeDescriptor(descriptor)
        descriptor = -1
    }
}

/// Reading a range of an open file in bounded memory: what hashing a partial file back, re-hashing it on resume and
/// copying a file across file systems share (the counterpart of `FileWriter`).
enum FileReader {
    /// Reads bytes `from..<to` of an open file, 1 MiB at a time.
    /// - Throws: `DownloadError.fileSystem` when the file cannot be read or ends early.
    static func read(
        _ fd: Int32, from: Int64, to: Int64, file: URL, url: URL, _ body: (UnsafeRawBufferPointer) -> Void
    ) throws(DownloadError) {
        guard to > from else { return }
        let capacity = Int(min(1 << 20, to - from))
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 16)
        defer { buffer.deallocate() }
        var position = from
        while position < to {
            let count = pread(fd, buffer.baseAddress, Int(min(Int64(capacity), to - position)), off_t(position))
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                let why = count < 0 ? POSIXError.current.localizedDescription : "it ended at \(position)"
                throw .fileSystem(url, reason: "cannot read \(file.lastPathComponent): \(why)")
            }
            body(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            position += Int64(count)
        }
    }
}

/// Hashes whole files already on disk, 1 MiB at a time.
enum FileDigest {
    /// The checksum of a file.
    /// - Parameters:
    ///   - file: the file.
    ///   - algorithm: which digest.
    /// - Throws: the file-system error when it cannot be read.
    static func checksum(of file: URL, algorithm: Checksum.Algorithm) throws -> Checksum {
        let handle = try FileHandle(forReadingFrom: file)
        defer { try? handle.close() }
        var hash = StreamingHash(algorithm)
        while let data = try handle.read(upToCount: 1 << 20), !data.isEmpty {
            data.withUnsafeBytes { hash.update(bufferPointer: $0) }
        }
        return hash.finalize()
    }
}
