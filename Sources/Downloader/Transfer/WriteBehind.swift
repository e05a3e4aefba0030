import Foundation

/// When the disk stage starts writing a partial file's new bytes out to the drive, and when it waits for what it
/// started: a value, tested without a file (`WriteBehindTests`).
///
/// Without it, a file written faster than its drive takes it piles up in the page cache (all of a 96 MiB body in 1.5 s
/// on a drive that writes 5 MB/s), and the next `fdatasync` — the one before each saved state — has to write the whole
/// pile. That call cannot be interrupted: a signal's clean stop, even `_exit`, waits for it (15.8 s in that case; 27.8
/// s on a CI machine; issue #48). So each `chunk` of new bytes is handed to the drive as soon as it is written
/// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`, which does not wait), after waiting for the chunk handed over before it
/// (`SYNC_FILE_RANGE_WAIT_BEFORE`): at most about two chunks of a file are ever unwritten to the drive, the writer runs
/// at the drive's pace, and the network side follows it by Range windows as it follows any slow disk
/// (`Transfer.StateMachine.WindowEndRule`).
///
/// Only for a file whose network side can be paced (`isOn`): windows, segments, or a whole body that can be resumed.
/// A body that cannot be resumed is not slowed down — Linux URLSession cannot slow a response, so a writer kept at the
/// drive's pace would hold it in memory — and saves no state before its end, so no sync waits on its pile.
struct WriteBehind: Equatable, Sendable {
    /// What the disk stage does after a write.
    enum Action: Equatable, Sendable {
        /// Nothing yet.
        case none
        /// Hand the file's unwritten bytes to the drive, without waiting.
        case start
        /// Wait until what was handed over before is on the drive, then hand over the rest.
        case waitThenStart
    }

    /// The bytes written between two hand-overs: 1 MiB, about 3 ms of a 365 MB/s drive, and 0.2 s of a 5 MB/s one.
    static let defaultChunk: Int64 = 1 << 20

    /// The bytes written between two hand-overs.
    let chunk: Int64
    /// Whether the file's network side can be paced (see the type's summary).
    var isOn = false
    /// Bytes written since the last hand-over.
    private(set) var unstarted: Int64 = 0
    /// Whether bytes were handed over and not waited for.
    private(set) var isStarted = false

    init(chunk: Int64 = Self.defaultChunk) {
        self.chunk = max(1, chunk)
    }

    /// Bytes were written to the file.
    /// - Parameter count: how many.
    /// - Returns: what to do now.
    mutating func wrote(_ count: Int64) -> Action {
        guard isOn, count > 0 else { return .none }
        unstarted += count
        guard unstarted >= chunk else { return .none }
        unstarted = 0
        defer { isStarted = true }
        return isStarted ? .waitThenStart : .start
    }

    /// The file was replaced by an empty one: nothing of it is written or handed over.
    mutating func fileEmptied() {
        unstarted = 0
        isStarted = false
    }
}
