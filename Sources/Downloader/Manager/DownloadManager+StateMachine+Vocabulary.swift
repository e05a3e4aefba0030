import struct Foundation.URL

// The words of the lifecycle state machine: phases, how transfers end, why waiters fail, and the actions it returns.
extension DownloadManager.StateMachine {
    /// A caller waiting for a download, with the checksum it expects, if any.
    struct Waiter: Equatable {
        let id: WaiterID
        let expectation: Checksum?
    }

    /// Where a download's verified file is and how long it is.
    typealias CompletedFile = DownloadManager.CompletedFile

    /// A request that waits while its download's completed file is looked at (`StateMachine.request`).
    struct HeldRequest: Equatable {
        let id: RequestID
        let expectation: Checksum?
        let priority: Int
        var waiter: WaiterID?
        let contradiction: String?
    }

    /// What came for a download while its completed file was looked at: carried out in order once it is reported.
    enum HeldEvent: Equatable {
        case request(HeldRequest)
        case remove(keepingCompletedFile: Bool)
        case suspend
        case resume
    }

    /// What happens once a stopping transfer has ended.
    enum Next: Equatable {
        case suspend
        /// Continue in the same slot: a new generation resumes from the partial file.
        case resume
    }

    /// Where one download is in its life.
    enum Phase: Equatable {
        /// Known, never started (receipts of an older version).
        case idle
        /// Waiting for a slot.
        case queued
        /// A transfer runs.
        case running(Generation)
        /// A transfer was told to stop and still holds its slot.
        case stopping(Generation, next: Next)
        case suspended
        case completed
        case failed

        /// The public state of a download in this phase.
        var state: DownloadState {
            switch self {
            case .idle: return .idle
            case .queued: return .queued
            case .running, .stopping(_, next: .resume): return .downloading
            case .stopping(_, next: .suspend), .suspended: return .suspended
            case .completed: return .completed
            case .failed: return .failed
            }
        }
    }

    /// How a transfer generation ended.
    enum TransferEnd: Equatable {
        /// Whole and verified against its own expectation; the checksum it computed (`nil` with hashing off).
        case completed(Checksum?)
        case failed(DownloadError)
        /// Stopped from outside: the partial file is kept.
        case cancelled
        /// The server asked to wait (`Retry-After`) before the next attempt: the download waits for it out of its
        /// slot (another download takes the slot meanwhile), then first in the queue; `retriesMade` retries of the
        /// download's limit are spent, the one this wait leads to included.
        case retryLater(after: Double, retriesMade: Int)
    }

    /// Why a waiter is answered with an error.
    enum Failure: Equatable {
        case error(DownloadError)
        case suspended
        case removed
        /// The manager shut down while the waiter waited.
        case shutDown
        /// The request came after the shutdown began: nothing was started for it.
        case afterShutdown
        /// The waiter's own task was cancelled.
        case waiterCancelled
        case mismatch(expected: Checksum, actual: Checksum)
        /// The request's expectation contradicts one the download keeps (the same algorithm, another digest).
        case conflict(kept: Checksum, requested: Checksum)
        /// The request's destination or file name contradicts the one of the download it would join (the reason).
        case conflictingOptions(String)
        /// The completed file could not be put where the request asked (it stays where it was).
        case unplaced(DownloadError)
    }

    /// How a transfer starts.
    struct Start: Equatable {
        /// What the transfer verifies the file against (the caller's; a server's digest is the transfer's own).
        var expectation: Checksum?
        /// The download's completed file is replaced once the new one is verified (a caller expected another
        /// checksum); until then it stays.
        var replacesCompletedFile: Bool
        /// Retries of the download's limit already spent (by a generation that ended to wait out a `Retry-After`).
        var retriesMade = 0
    }

    /// What the owner carries out, in order.
    enum Action: Equatable {
        /// The options of the request just made (or of the held `request`) become the download's: all of them for a
        /// new download (`fresh`), else the ones the request sets, merged into those the download keeps.
        case adoptOptions(Key, fresh: Bool, request: RequestID? = nil)
        /// Keep the options of this request until `.releaseRequest`: it waits for a completed file to be looked at.
        case hold(Key, RequestID)
        /// Look at the completed file (still there as recorded?), move it where this held request asks, and report
        /// `completedFileInspected`.
        case inspectCompletedFile(Key, RequestID)
        /// The held request was carried out: its options are not needed any more.
        case releaseRequest(RequestID)
        /// Nobody waits to be told this: say it as a warning.
        case warn(Key, Failure)
        /// The download's public state is now this (tell listeners, save).
        case publish(Key, DownloadState)
        /// The download failed with this error (kept in the receipt).
        case recordFailure(Key, DownloadError)
        case start(Key, Generation, Start)
        case cancel(Key, Generation)
        /// The file produced by this generation is the download's completed file; the one it had before, at
        /// another place (`replaced`), is not the download's any more but stays (a destination's file is the user's).
        case complete(Key, Generation, replaced: URL? = nil)
        case succeed([WaiterID], Key)
        case fail([WaiterID], Key, Failure)
        /// Hash the completed file with the expectation's algorithm and report `verified`.
        case verify(Key, Checksum)
        /// Delete the partial file and its state, the file that generation produced (if any) and the download's
        /// completed file (if it still has one).
        case discardFiles(Key, producedBy: Generation?, completedFile: URL? = nil)
        /// The completed file is not the download's any more (forgotten, or gone or changed and fetched again): it stays
        /// where it is, the user's, and nothing deletes it. Where the completed file is (and whether there is one) is
        /// the machine's to know (`completedFile(of:)`); the action names it, when there is one.
        case releaseCompletedFile(Key, file: URL? = nil)
        /// The download is gone: drop its receipt. With `keepsPlacedFile`, its completed file stays where it was placed
        /// (a batch forgets what it delivered): the placement's journal line may stand for the removal.
        case forget(Key, keepsPlacedFile: Bool = false)
        /// Shutdown asked and every transfer has ended.
        case shutDownCompleted
        /// Call `retryDue(key)` after this many seconds: the download waits out a `Retry-After` without a slot.
        case wake(Key, after: Double)

        /// This action, with its `.adoptOptions` naming the held request whose options it adopts.
        func adopting(for request: RequestID) -> Self {
            guard case .adoptOptions(let key, let fresh, _) = self else { return self }
            return .adoptOptions(key, fresh: fresh, request: request)
        }
    }
}
