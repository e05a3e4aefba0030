import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// The system calls whose names Swift methods of this package share (`write`, `close`, `link`, …), named apart, and the
// error `errno` holds.

/// `write(2)`.
@inline(__always)
func posixWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, buffer, count)
}

/// `close(2)`.
@inline(__always)
func closeDescriptor(_ fd: Int32) -> Int32 {
    close(fd)
}

/// `link(2)`. - Returns: 0, or `errno`.
func posixLink(_ source: URL, _ target: URL) -> Int32 {
    link(source.path, target.path) == 0 ? 0 : errno
}

/// `rename(2)`. - Returns: 0, or `errno`.
func posixRename(_ source: URL, _ target: URL) -> Int32 {
    rename(source.path, target.path) == 0 ? 0 : errno
}

/// `unlink(2)`.
func posixUnlink(_ file: URL) {
    _ = unlink(file.path)
}

/// Makes a file's data durable: `fdatasync(2)` on Linux; on Darwin `fcntl(F_FULLFSYNC)`, since there `fsync(2)` only
/// hands the data to the drive, whose cache may lose it at a power cut (`fsync` again where the file system cannot).
@inline(__always)
func syncData(_ fd: Int32) -> Int32 {
    #if os(Linux)
        return fdatasync(fd)
    #else
        return syncFully(fd)
    #endif
}

/// Makes a file or a folder durable, its metadata too: `fsync(2)` on Linux; on Darwin `fcntl(F_FULLFSYNC)`, falling
/// back to `fsync` where the file system does not support it.
@inline(__always)
func syncFully(_ fd: Int32) -> Int32 {
    #if canImport(Darwin)
        if fcntl(fd, F_FULLFSYNC) == 0 { return 0 }
        return fsync(fd)
    #else
        return fsync(fd)
    #endif
}

/// Hands a file's dirty pages to the drive without waiting for them (`sync_file_range(SYNC_FILE_RANGE_WRITE)` over the
/// whole file; Linux only, elsewhere nothing): see `WriteBehind`.
func startWriteback(_ fd: Int32) {
    #if os(Linux)
        _ = SyncFileRange.call?(fd, 0, 0, 2 /* SYNC_FILE_RANGE_WRITE */)
    #endif
}

/// Waits until the pages of a file that are being written to the drive are written
/// (`sync_file_range(SYNC_FILE_RANGE_WAIT_BEFORE)` over the whole file; Linux only, elsewhere nothing): see
/// `WriteBehind`.
func waitForWriteback(_ fd: Int32) {
    #if os(Linux)
        _ = SyncFileRange.call?(fd, 0, 0, 1 /* SYNC_FILE_RANGE_WAIT_BEFORE */)
    #endif
}

#if os(Linux)
    /// glibc's `sync_file_range(2)` (a GNU extension Swift's Glibc module does not import), found at run time.
    private enum SyncFileRange {
        typealias Call = @convention(c) (Int32, Int64, Int64, UInt32) -> Int32
        static let call: Call? = dlsym(nil, "sync_file_range").map { unsafeBitCast($0, to: Call.self) }
    }
#endif

extension POSIXError {
    /// The error `errno` names now.
    static var current: POSIXError { POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }

    /// The error for an `errno` value.
    init(_ code: Int32) {
        self.init(POSIXErrorCode(rawValue: code) ?? .EIO)
    }
}

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

extension FileManager {
    /// The size of the file at `url` in bytes, or `nil` when there is no such file.
    ///
    /// One `stat(2)`: `attributesOfItem` also resolves owner and group names, which costs more than the call itself
    /// when thousands of receipts are refreshed.
    func sizeOfItem(at url: URL) -> Int64? {
        var info = stat()
        guard stat(url.path, &info) == 0 else { return nil }
        return Int64(info.st_size)
    }

    /// The bytes an unprivileged process may still write on the file system of `url` (`statvfs(3)`'s `f_bavail`),
    /// or `nil` when it cannot be asked. On Darwin, the capacity for important usage: it counts the purgeable space
    /// (caches the system frees on demand) that `statvfs` leaves out.
    func freeSpace(at url: URL) -> Int64? {
        #if canImport(Darwin)
            if let values = try? url.resourceValues(forKeys: [.volumeAvailableCapacityForImportantUsageKey]),
                let capacity = values.volumeAvailableCapacityForImportantUsage, capacity > 0
            {
                return capacity
            }
        #endif
        var info = statvfs()
        guard statvfs(url.path, &info) == 0 else { return nil }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }
}
