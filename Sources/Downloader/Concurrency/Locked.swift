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
