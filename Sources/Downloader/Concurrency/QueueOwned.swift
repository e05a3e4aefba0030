import Dispatch

/// State that one serial dispatch queue owns: code running on that queue reads and changes it, and so does the owner
/// of the whole pipeline while every queue is idle (`isHandedOver`: before the first command, and after a drain).
///
/// The type states what a comment used to (`DiskPipeline`'s stages: issue #33); debug builds check it at every access
/// (`dispatchPrecondition`), release builds pay nothing. Not a lock: the ordering comes from the queues themselves.
final class QueueOwned<Value>: @unchecked Sendable {
    private var stored: Value
    private let queue: DispatchQueue
    private let isHandedOver: @Sendable () -> Bool

    /// Wraps `value`, owned by `queue`.
    /// - Parameters:
    ///   - value: the state.
    ///   - queue: the serial queue that owns it.
    ///   - isHandedOver: whether every stage is idle and the pipeline's owner may touch it from anywhere.
    init(_ value: Value, ownedBy queue: DispatchQueue, isHandedOver: @escaping @Sendable () -> Bool) {
        stored = value
        self.queue = queue
        self.isHandedOver = isHandedOver
    }

    /// The state, for its owner.
    var value: Value {
        _read {
            checkOwner()
            yield stored
        }
        _modify {
            checkOwner()
            yield &stored
        }
    }

    /// The state without the check: for `deinit`, when nothing else can hold the pipeline.
    var valueAtTheEnd: Value { stored }

    @inline(__always)
    private func checkOwner() {
        #if DEBUG
            if !isHandedOver() { dispatchPrecondition(condition: .onQueue(queue)) }
        #endif
    }
}
