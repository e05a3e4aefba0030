import Foundation

/// A point in the disk queue's work that the network side can wait for without blocking a thread.
final class DiskFence: Sendable {
    private let state = Locked<(isOpen: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    /// Opens the fence, resuming its waiter.
    func open() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.isOpen = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Waits until the fence is open (one waiter at a time).
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isOpen = state.withLock { state -> Bool in
                if !state.isOpen { state.waiter = continuation }
                return state.isOpen
            }
            if isOpen { continuation.resume() }
        }
    }
}
