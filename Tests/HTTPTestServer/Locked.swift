import Foundation

/// A value guarded by a pthread-backed lock, for the server and the tests.
///
/// `Synchronization.Mutex` is invisible to ThreadSanitizer on Linux (it uses raw futexes), so the sanitizer run
/// reports every access under it; `NSLock` is a pthread mutex the sanitizer understands.
public final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    /// Creates the guarded value.
    public init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with exclusive access to the value.
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
