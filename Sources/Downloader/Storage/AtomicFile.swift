import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Whole-file writes that a crash can never leave half-done: the bytes go to a temporary file beside the target,
/// which is then renamed over it. A `kill -9` between the two leaves only a temporary file, which
/// `removeOrphans(in:)` clears at the next start.
///
/// Files are created with the mode asked for (0600 by default: state files may hold request headers with
/// credentials), by `open(2)` itself, so there is no moment when they are readable by others.
enum AtomicFile {
    /// The marker in temporary file names (Foundation's own atomic writes use `.dat.nosync`).
    static let temporaryMarker = ".tmp-"

    /// Writes `data` to `file` atomically.
    /// - Parameters:
    ///   - data: the whole content.
    ///   - file: the target; replaced if it exists.
    ///   - mode: the permissions the file is created with.
    ///   - durable: `fsync` the file before the rename, so a power loss leaves the old or the new content.
    /// - Throws: `POSIXError` from the file system.
    static func write(_ data: Data, to file: URL, mode: mode_t = 0o600, durable: Bool = false) throws {
        let temporary = temporaryFile(beside: file)
        let fd = try create(temporary, mode: mode)
        do {
            try data.withUnsafeBytes { try writeAll(fd, $0) }
            if durable, fsync(fd) != 0 { throw POSIXError.current }
            guard close(fd) == 0 else { throw POSIXError.current }
            // rename(2) replaces the target atomically, whether or not it exists.
            guard rename(temporary.path, file.path) == 0 else { throw POSIXError.current }
        } catch {
            unlink(temporary.path)
            throw error
        }
    }

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

/// `write(2)`, named apart from the Swift methods called `write`.
@inline(__always)
func posixWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    #if canImport(Darwin)
        return Darwin.write(fd, buffer, count)
    #elseif canImport(Musl)
        return Musl.write(fd, buffer, count)
    #else
        return Glibc.write(fd, buffer, count)
    #endif
}

extension POSIXError {
    /// The error `errno` names now.
    static var current: POSIXError { POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
}
