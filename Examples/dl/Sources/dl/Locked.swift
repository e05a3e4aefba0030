import Foundation

/// A value guarded by a lock (`NSLock`, which ThreadSanitizer understands), with the `withLock` shape of
/// `Synchronization.Mutex`: `dl`'s own, as an application's (the library keeps its lock to itself).
final class Locked<Value> {
    private let lock = NSLock()
    private var value: Value

    /// Creates the guarded value.
    init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with exclusive access to the value.
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

// The lock serialises every access to `value`, so sharing it is safe exactly when the value itself may be sent.
extension Locked: @unchecked Sendable where Value: Sendable {}
