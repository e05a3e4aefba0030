import Dispatch

/// Serial Dispatch queues kept for reuse once their user is done with them.
///
/// Each transfer used five queues of its own (its disk pipeline's three, and one for each `Blocking` hop), made and
/// freed again: about 3,000 instructions and three allocations a queue, for every small file of a list (issue #52).
/// A queue taken from a pool is still one nobody else uses until it is given back, so it gets a thread of its own as
/// a new one would.
final class QueuePool: Sendable {
    private let label: String
    private let qos: DispatchQoS
    private let idle = Locked<[DispatchQueue]>([])
    /// The most idle queues kept; more are freed.
    let keeps: Int

    /// - Parameters:
    ///   - label: the label of the queues made.
    ///   - qos: their quality of service.
    ///   - keeps: the most idle queues kept.
    init(label: String, qos: DispatchQoS = .unspecified, keeps: Int = 64) {
        self.label = label
        self.qos = qos
        self.keeps = keeps
    }

    /// How many idle queues are kept now.
    var idleCount: Int { idle.withLock { $0.count } }

    /// An idle queue: a kept one, else a new one.
    /// - Returns: a serial queue that is the caller's until it gives it back.
    func take() -> DispatchQueue {
        idle.withLock { $0.popLast() } ?? DispatchQueue(label: label, qos: qos)
    }

    /// Gives a queue back for reuse. Work still queued on it runs before a later user's.
    /// - Parameter queue: a queue this pool gave.
    func give(_ queue: DispatchQueue) {
        idle.withLock { if $0.count < keeps { $0.append(queue) } }
    }
}
