import Foundation

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
