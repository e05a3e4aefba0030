import Foundation

/// Gives freed memory back to the system four times a second while downloads run, for a manager with a
/// `Configuration.memoryBudget` (glibc only; elsewhere it does nothing).
///
/// URLSession allocates each chunk on its own threads and the disk frees it on others, so glibc spreads freed memory
/// over many arenas (one per thread that allocated, up to 8 per core) and keeps it: 20 downloads of 100 MiB peaked at
/// 157–171 MB, against 64–72 MB with one arena. The arena limit (`MALLOC_ARENA_MAX`) takes effect only before the
/// process's first threads, which a library never sees; `malloc_trim(0)`, which returns the free pages of every arena,
/// works at any time (BENCHMARKS.md). It runs on a thread of its own: a Dispatch timer waited behind busy downloads
/// and trimmed a few times a run.
final class MallocTrimmer: Sendable {
    private typealias Trim = @convention(c) (Int) -> Int32
    /// How many transfers run (the actor's count; nothing is trimmed while none does), and whether it stopped.
    private let state = Locked((running: 0, stopped: false))

    init() {
        #if canImport(Glibc)
            guard let symbol = dlsym(nil, "malloc_trim") else { return }
            let trim = unsafeBitCast(symbol, to: Trim.self)
            let state = self.state
            let thread = Thread {
                while true {
                    usleep(250_000)
                    let (running, stopped) = state.withLock { ($0.running, $0.stopped) }
                    if stopped { return }
                    if running > 0 { _ = trim(0) }
                }
            }
            thread.name = "Downloader.MallocTrimmer"
            thread.start()
        #endif
    }

    /// The number of running transfers changed.
    func transfersRunning(_ count: Int) {
        state.withLock { $0.running = count }
    }

    /// Stops for good (the manager shut down): the thread ends within a quarter of a second.
    func stop() {
        state.withLock { $0.stopped = true }
    }
}
