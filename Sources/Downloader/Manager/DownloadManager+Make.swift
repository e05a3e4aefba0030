import Dispatch
import Foundation

extension DownloadManager {
    /// Makes a manager on a directory like `init(configuration:)`, waiting for another manager to let go of the
    /// directory without blocking a thread: for `async` code such as a service's start-up.
    ///
    /// It waits up to `Configuration.directoryLockTimeout` (`.infinity`: as long as it takes), trying the lock every
    /// 50 ms; the directory is created and the saved receipts are read on a thread of Dispatch's, never on a
    /// cooperative thread.
    /// - Parameter configuration: the directory and the limits.
    /// - Returns: the manager, which owns the directory until `shutdown()`.
    /// - Throws: `CancellationError` when the calling task is cancelled while waiting; otherwise what
    ///   `init(configuration:)` throws (`DownloadError.directoryLocked` once the timeout has passed).
    public static func make(configuration: Configuration) async throws -> DownloadManager {
        var attempt = configuration
        attempt.directoryLockTimeout = 0
        let timeout = configuration.directoryLockTimeout
        let deadline = timeout.isFinite ? ContinuousClock.now + .milliseconds(Int64(max(0, timeout) * 1000)) : nil
        let once = attempt
        while true {
            try Task.checkCancellation()
            do {
                return try await withCheckedThrowingContinuation { continuation in
                    DispatchQueue.global().async {
                        continuation.resume(with: Result { try DownloadManager(configuration: once) })
                    }
                }
            } catch let error as DownloadError where error == .directoryLocked {
                if let deadline, ContinuousClock.now >= deadline { throw error }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }
}
