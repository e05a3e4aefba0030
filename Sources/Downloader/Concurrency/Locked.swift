import Dispatch
import Foundation

/// A value guarded by a lock, with the `withLock` shape of `Synchronization.Mutex`.
///
/// Why not `Mutex`: on Linux it is built on raw futexes that ThreadSanitizer does not see, so every access under it
/// is reported as a race (checked on Swift 6.3.1 with four threads incrementing a `Mutex<Int>`). This lock is a
/// pthread mutex (`NSLock`), which the sanitizer understands, so `swift test --sanitize=thread` reports only real
/// races.
///
/// The package's one lock: the library, the test server and the tests share it (`package`). Like `Mutex`, it is
/// `Sendable` only when its value is, so a lock never smuggles a non-`Sendable` value across threads.
package final class Locked<Value> {
    private let lock = NSLock()
    private var value: Value

    /// Creates the guarded value.
    package init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with exclusive access to the value.
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

// The lock serialises every access to `value`, so sharing it is safe exactly when the value itself may be sent.
extension Locked: @unchecked Sendable where Value: Sendable {}

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

/// Blocking file work — hashing a partial file again, syncing it, moving or copying a file — on a Dispatch thread,
/// never on one of the few cooperative threads that every task and the manager's actor share (two on two cores):
/// transfers that hashed their partial files there after `kill -9` once held the manager's first answer for 1–2 s.
/// (The one exception is bounded: a small fresh file's last steps, one at a time, while the disk is fast —
/// `InlineFinishRule`.)
enum Blocking {
    /// The queues the bodies run on: one no other body uses, each time.
    static let queues = QueuePool(label: "downloader.blocking", qos: .utility)

    /// Runs `body` on a Dispatch thread.
    /// - Parameter body: the work; it may block.
    /// - Returns: what `body` returned.
    /// - Throws: what `body` threw.
    static func run<Value: Sendable, Failure: Error>(
        _ body: @escaping @Sendable () throws(Failure) -> Value
    ) async throws(Failure) -> Value {
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<Value, Failure>, Never>) in
            // A queue of its own, not a global one: a global queue runs at most about one item per core at once (on
            // Linux, more only once its monitor sees threads blocked, a second or more later), so a few slow bodies
            // (a sync, a hash of a large partial file) held every other transfer's restore before its first request
            // (the suite saw transfers with no request for 120 s). A serial queue nobody else uses gets a thread of
            // its own (`QueuePool`).
            let queue = queues.take()
            queue.async {
                let result = Result { () throws(Failure) -> Value in try body() }
                queues.give(queue)  // before the answer: the body is done, a later one runs right after this block
                continuation.resume(returning: result)
            }
        }
        return try result.get()
    }
}

extension Dictionary {
    /// Changes the value for `key` in place, if there is one: a copy out and back (`var v = d[k]; …; d[k] = v`)
    /// retains and releases each reference the value holds, twice.
    /// - Parameters:
    ///   - key: the key.
    ///   - body: changes the value; what it returns is returned.
    /// - Returns: what `body` returned, or `nil` when there is no value for `key`.
    mutating func modifyValue<Result>(forKey key: Key, _ body: (inout Value) throws -> Result) rethrows -> Result? {
        guard let index = index(forKey: key) else { return nil }
        return try body(&values[index])
    }
}
