import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// How many malloc arenas `dl` asks glibc for: one while every URL it was given runs at once, glibc's default for a
/// list.
///
/// glibc gives each thread that allocates an arena of its own (up to eight per core). A large file's 16 KiB chunks are
/// allocated on whichever dispatch thread runs URLSession's queue and freed on the disk's, so the freed memory spreads
/// over many arenas: one 1 GiB file peaked at 68–95 MB with the default arenas against 48–64 MB with one
/// (`BENCHMARKS.md`), which breaks the promise of a peak RSS flat in the file's size. One arena, though, puts every
/// thread's `malloc` behind one lock: a list of small files, whose every file allocates on the network's, the disk's
/// and Swift's task threads, waits on it (about 5 more `futex` calls a file) and spends 0.11–0.13 ms more CPU a file
/// on two cores. So the limit follows the work: a list (`-i` with more than one URL, or more URLs on the command line
/// than `--max-active` runs at once) keeps the default arenas, anything else gets one. A limit the user set in the
/// environment wins.
enum MallocArenas {
    /// The arena limit for a run, or `nil` to leave glibc's own.
    /// - Parameters:
    ///   - arguments: the parsed command line.
    ///   - environment: the process's environment variables.
    /// - Returns: 1 when every URL runs at once; `nil` for a list, or when the environment sets a limit
    ///   (`MALLOC_ARENA_MAX`, or `glibc.malloc.arena_max` in `GLIBC_TUNABLES`), which glibc then applies itself.
    static func limit(for arguments: Arguments, environment: [String: String]) -> Int32? {
        if environment["MALLOC_ARENA_MAX"] != nil { return nil }
        if environment["GLIBC_TUNABLES"]?.contains("glibc.malloc.arena_max") == true { return nil }
        let isList = arguments.input != nil || arguments.requests.count > arguments.maximumActive
        return isList ? nil : 1
    }

    /// Sets glibc's arena limit; call before the first thread other than the main one allocates.
    /// - Parameter limit: the limit (`nil`: nothing is changed).
    static func apply(_ limit: Int32?) {
        #if canImport(Glibc)
            // `mallopt` is not exported by the Glibc module, so it is looked up by name (RTLD_DEFAULT is a null
            // handle on glibc).
            guard let limit, let symbol = dlsym(nil, "mallopt") else { return }
            typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
            let mallocArenaMax: Int32 = -8  // M_ARENA_MAX in malloc.h
            _ = unsafeBitCast(symbol, to: Mallopt.self)(mallocArenaMax, limit)
        #endif
    }
}
