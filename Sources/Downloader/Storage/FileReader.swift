import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

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
