import Foundation

/// What a transfer tells its owner, as it happens: the one way up from a transfer to the manager (issue #51), in place
/// of a closure per kind of news.
///
/// Counts (bytes, requests in flight) are written where they change and read when the owner looks (the manager's
/// ticker), so a chunk costs a lock, not a hop to an actor. The placement is recorded before the file moves, so it is
/// synchronous. News (a warning, a note for the log) is queued in order: the manager's `TransferReport` hands it to
/// the actor in the order told, and the transfer's end after it.
protocol TransferObserver: Sendable {
    /// Bytes on disk and the total, if known: after every chunk, on the delegate or disk queue. Must be cheap.
    func transferProgressed(written: Int64, total: Int64?)
    /// One of its requests (a HEAD, a window, a segment) started (`+1`) or ended (`-1`).
    func transferRequestsChanged(by delta: Int)
    /// The verified file is about to move to `placement.file`: recorded durably before this returns, so that a crash
    /// during the move is recognised at the next start.
    func transferWillPlace(_ placement: TransferPlacement)
    /// Something the transfer decided: bytes it could not trust (a warning), or a note for the log.
    func transferSays(_ news: TransferNews)
}

/// Where a verified file goes, told just before it moves.
struct TransferPlacement: Sendable, Equatable {
    /// Its path in the completed area (or the caller's destination).
    let file: URL
    /// Its file name (the last component of `file`), as the placement chose it.
    let name: String
    /// Its length.
    let length: Int64
    /// Its digest, when it was hashed.
    let checksum: Checksum?
    /// The server's suggested file name, if any.
    let suggestedFilename: String?
}

/// What a transfer says that is not a count.
enum TransferNews: Sendable, Equatable {
    /// Bytes on disk could not be trusted and were not used; the download goes on without them.
    case warning(String)
    /// A decision worth a log line (a response ended early because the disk fell behind).
    case note(String)
}
