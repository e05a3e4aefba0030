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

extension POSIXError {
    /// The error `errno` names now.
    static var current: POSIXError { POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }

    /// The error for an `errno` value.
    init(_ code: Int32) {
        self.init(POSIXErrorCode(rawValue: code) ?? .EIO)
    }
}
