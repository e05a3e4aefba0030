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

/// `fdatasync(2)` where there is one, else `fsync(2)`.
@inline(__always)
func syncData(_ fd: Int32) -> Int32 {
    #if os(Linux)
        return fdatasync(fd)
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
