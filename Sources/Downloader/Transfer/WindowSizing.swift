/// How long a transfer's next full Range window is: a value whose events are a window's end and a window cut short
/// because the disk fell behind, tested without sockets.
///
/// On a link with a long round trip every window costs one idle round trip before its first byte, so windows grow
/// while the network, not the disk, is the slower side: a full window during which never more than a quarter of a
/// base window waited to be written, and the hash stage kept what it had not hashed in memory, makes the next four
/// times as long, up to `maximum` (from 4 MiB: 16, 64, then 128 MiB, so 256 MiB take five requests, not 64). Memory keeps its bound: a grown window ends early once more than one and a half base windows wait
/// for the disk, and the windows start again at `base`. A window of the base size needs no such limit: the next
/// request waits until the disk is past the middle of this one, so at most one and a half windows wait.
struct WindowSizing: Sendable, Equatable {
    /// The first full window, and the size windows return to when the disk falls behind.
    let base: Int64
    /// The longest window.
    let maximum: Int64
    /// The length of the next full window.
    private(set) var full: Int64

    /// Starts at `base`.
    /// - Parameters:
    ///   - base: the first full window (at least one byte).
    ///   - maximum: the longest window (never less than `base`).
    init(base: Int64, maximum: Int64) {
        self.base = max(1, base)
        self.maximum = max(self.base, maximum)
        full = self.base
    }

    /// A window of `length` bytes arrived whole; at most `peakUnwritten` of the received bytes waited for the disk at
    /// once while it arrived, and `hashFellBehind` says whether the hasher had to read some of them back from the
    /// file (hashing, not writing, was the slower side).
    mutating func windowEnded(length: Int64, peakUnwritten: Int64, hashFellBehind: Bool = false) {
        guard length == full, peakUnwritten <= base / 4, !hashFellBehind else { return }
        full = min(4 * full, maximum)
    }

    /// A grown window ended early because too many of its bytes waited for the disk.
    mutating func diskFellBehind() {
        full = base
    }

    /// The most received bytes a window of `length` bytes lets wait for the disk before it ends early; `nil` when its
    /// own length bounds them.
    func unwrittenLimit(forWindowOf length: Int64) -> Int64? {
        length > base ? base * 3 / 2 : nil
    }
}
