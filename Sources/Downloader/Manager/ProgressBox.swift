import Dispatch

/// Bytes on disk and the total, written from the delegate queue after every chunk and read by the manager's ticker:
/// progress reaches the actor at most every tick, never once per chunk.
final class ProgressBox: Sendable {
    private let counts = Locked<(written: Int64, total: Int64?)>((0, nil))

    func update(written: Int64, total: Int64?) {
        counts.withLock { $0 = (written, total) }
    }

    var current: (written: Int64, total: Int64?) { counts.withLock { $0 } }
}
