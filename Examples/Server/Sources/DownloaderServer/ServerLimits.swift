#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How many connections the service keeps at once: its descriptor limit (`ulimit -n`) less a reserve for the
/// downloads' sockets, files and state (a flood of idle connections took the process to EMFILE, then down).
enum ServerLimits {
    /// Descriptors kept for everything but client connections.
    static let reserve = 256

    /// The connection cap for a descriptor limit of `limit` (the process's own when `nil`): at least 16.
    static func connectionLimit(descriptorLimit limit: Int? = nil) -> Int {
        let descriptors = limit ?? currentDescriptorLimit()
        return max(16, min(4096, descriptors - reserve))
    }

    static func currentDescriptorLimit() -> Int {
        var limit = rlimit()
        #if canImport(Glibc)
            guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        #else
            guard getrlimit(RLIMIT_NOFILE, &limit) == 0 else { return 1024 }
        #endif
        // RLIM_INFINITY is all ones (it does not import as a constant on Linux): clamped to Int.max.
        return Int(clamping: limit.rlim_cur)
    }
}
