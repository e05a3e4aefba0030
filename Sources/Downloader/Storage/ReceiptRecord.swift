import Foundation

/// One download as the manager keeps it: its receipt and the options needed to resume it after a restart.
struct ReceiptRecord: Sendable, Equatable {
    var receipt: DownloadReceipt
    var options: DownloadOptions
    /// The server's `Content-Disposition` name of the completed file, for renaming it under another naming.
    var suggestedFilename: String?
    /// The expected checksums as saved, its own first: read at start; while the manager runs, its state machine
    /// keeps them.
    var savedExpectations = KeptExpectations.none
    /// Read at start: the receipt's file is a verified file that a newer version, not finished, replaces once verified.
    var replacesCompletedFile = false
    /// It was asked with credentials (a URL user or password, a secret header), which are never saved: after a
    /// restart it needs them again.
    var needsCredentials = false
}

/// The expected checksums a download keeps, saved with it: its own (what its transfers verify), and the others that
/// requests added beside it (compared with the completed file; see `DownloadManager.StateMachine.Entry`).
struct KeptExpectations: Sendable, Equatable {
    var own: Checksum?
    var others: [Checksum] = []

    static let none = KeptExpectations()

    /// Every one of them, its own first.
    var all: [Checksum] { (own.map { [$0] } ?? []) + others }
}
