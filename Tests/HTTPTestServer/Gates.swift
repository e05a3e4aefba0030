import Foundation

/// Barriers for `gate=G&gateSize=K`: a response waits until K requests have arrived at its gate. Arrivals are counted
/// once per request; a gate that has opened stays open.
final class Gates: @unchecked Sendable {
    private let condition = NSCondition()
    private var arrivals: [String: Int] = [:]

    /// Counts an arrival and waits until the gate is open.
    /// - Returns: `false` when the server is stopping or 30 s passed first (the test then fails on its own checks).
    func pass(_ name: String, size: Int, isStopping: () -> Bool) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        arrivals[name, default: 0] += 1
        condition.broadcast()
        let deadline = Date().addingTimeInterval(30)
        while arrivals[name, default: 0] < size {
            if isStopping() || Date() >= deadline { return false }
            _ = condition.wait(until: min(deadline, Date().addingTimeInterval(0.1)))
        }
        return true
    }

    /// Opens a gate whatever its size: its waiting and later requests pass.
    func open(_ name: String) {
        condition.lock()
        arrivals[name] = Int.max / 2
        condition.broadcast()
        condition.unlock()
    }

    /// Wakes every waiter so that it notices the server stopping.
    func wakeAll() {
        condition.lock()
        condition.broadcast()
        condition.unlock()
    }
}
