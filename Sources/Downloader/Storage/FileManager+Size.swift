import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

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
