import Dispatch

/// One serial queue for the manager's file clean-ups (deleting partial, state and completed files), so that the
/// actor never waits on the disk and a transfer can start after every clean-up queued before it (`barrier()`).
final class FileWorkQueue: Sendable {
    private let queue = DispatchQueue(label: "Downloader.FileWorkQueue")

    /// Runs `work` after everything queued before it.
    func async(_ work: @escaping @Sendable () -> Void) {
        queue.async(execute: work)
    }

    /// Returns once everything queued before this call has run.
    func barrier() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async { continuation.resume() }
        }
    }
}
