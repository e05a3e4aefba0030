import Foundation

/// A value guarded by a lock, with the `withLock` shape of `Synchronization.Mutex`.
///
/// Why not `Mutex`: on Linux it is built on raw futexes that ThreadSanitizer does not see, so every access under it
/// is reported as a race (checked on Swift 6.3.1 with four threads incrementing a `Mutex<Int>`). This lock is a
/// pthread mutex (`NSLock`), which the sanitizer understands, so `swift test --sanitize=thread` reports only real
/// races.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

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
