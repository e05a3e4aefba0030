import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The conventions of files written whole and renamed into place (`StateFolder.write`, a copy across file systems):
/// temporary names that a crash may leave and the next start clears (`removeOrphans(in:)`), files created with their
/// mode by `open(2)` itself, and writing every byte of a buffer.
enum AtomicFile {
    /// The marker in temporary file names (Foundation's own atomic writes use `.dat.nosync`).
    static let temporaryMarker = ".tmp-"

    /// A name for a temporary file in `file`'s directory that `removeOrphans(in:)` recognises.
    static func temporaryFile(beside file: URL) -> URL {
        file.deletingLastPathComponent()
            .appendingPathComponent(".\(file.lastPathComponent)\(temporaryMarker)\(UUID().uuidString)")
    }

    /// Creates a new file (it must not exist) with `mode`, whatever the process's umask, and opens it for writing.
    /// - Returns: the descriptor; the caller closes it.
    static func create(_ file: URL, mode: mode_t) throws -> Int32 {
        let fd = open(file.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw POSIXError.current }
        // The umask may have taken bits away from `mode`; it never adds any, so 0600 stays 0600.
        if fchmod(fd, mode) != 0 {
            let error = POSIXError.current
            close(fd)
            throw error
        }
        return fd
    }

    /// Writes every byte of `buffer` to `fd`, looping on short writes and EINTR.
    static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) throws {
        guard var pointer = buffer.baseAddress else { return }
        var remaining = buffer.count
        while remaining > 0 {
            let written = posixWrite(fd, pointer, remaining)
            if written < 0 {
                if errno == EINTR { continue }
                throw POSIXError.current
            }
            pointer += written
            remaining -= written
        }
    }

    /// Deletes temporary files that a crash left in `directory` (ours, and Foundation's `.dat.nosync…`).
    static func removeOrphans(in directory: URL) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return }
        for name in names where name.hasPrefix(".") && (name.contains(temporaryMarker) || name.hasPrefix(".dat.nosync"))
        {
            try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))
        }
    }
}
