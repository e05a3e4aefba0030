/// The expected checksums a download keeps, saved with it: its own (what its transfers verify), and the others that
/// requests added beside it (compared with the completed file; see `DownloadManager.StateMachine.Entry`).
struct KeptExpectations: Sendable, Equatable {
    var own: Checksum?
    var others: [Checksum] = []

    static let none = KeptExpectations()

    /// Every one of them, its own first.
    var all: [Checksum] { (own.map { [$0] } ?? []) + others }
}
