/// How a download's file gets its room on disk before its bytes arrive (aria2's `--file-allocation` names).
///
/// The reservation never changes the partial file's length — a resume reads how far a download got from it — so it
/// uses `fallocate(2)` with `FALLOC_FL_KEEP_SIZE`: instant on ext4, xfs, btrfs and tmpfs, done once the file's length
/// is known. Where the file system cannot reserve room that way (or off Linux), nothing is reserved and the download
/// goes on as with `.none`.
public enum FileAllocation: String, Sendable, Hashable, Codable, CaseIterable {
    /// Reserve nothing: blocks are taken as bytes arrive.
    case none
    /// aria2's name for reserving the room first; here the same as `.falloc` (aria2 writes zeros instead, which
    /// would make the file look complete to a resume).
    case prealloc
    /// Reserve the whole file's blocks with `fallocate(2)` once its length is known: fewer fragments when several
    /// connections write far apart, and a full disk fails at the start rather than part-way.
    case falloc
}
