import Foundation

/// The words of `Transfer.StateMachine`: its settings, the request it asks for, what a request's sink reports, and
/// the actions.
extension Transfer.StateMachine {
    /// The engine settings the decisions use: the transfer's configuration (its fields read through, as
    /// `settings.windowSize`), and what the bandwidth limits allow.
    @dynamicMemberLookup
    struct Settings: Sendable, Equatable {
        let configuration: Transfer.Configuration
        /// The longest window the bandwidth limits allow (`nil`: no limit).
        let limitedWindowSize: Int64?

        init(_ configuration: Transfer.Configuration, limitedWindowSize: Int64? = nil) {
            self.configuration = configuration
            self.limitedWindowSize = limitedWindowSize
        }

        subscript<Value>(dynamicMember field: KeyPath<Transfer.Configuration, Value>) -> Value {
            configuration[keyPath: field]
        }

        /// Whether a run's first request on a new connection asks for a whole window, cut short when slow
        /// (`Transfer.Configuration.firstRequestBudget`).
        var wholeFirstRequest: Bool { configuration.firstRequestBudget != nil }
    }

    /// One GET to send.
    struct Window: Sendable, Equatable {
        /// Where the URL redirected to earlier in this run (`nil`: the URL itself).
        var target: URL?
        /// The resume point: the first byte this window adds.
        var start: Int64
        /// Bytes before `start` asked for again and compared with the file's (no strong validator).
        var overlap = 0
        /// The last byte asked for (`nil`: no `Range` header, the whole resource).
        var end: Int64?
        /// The `If-Range` value, on a continuation.
        var ifRange: String?
        /// For a grown window, the most received bytes that may wait for the disk before it ends early.
        var unwrittenLimit: Int64?
        /// Whether the response must prove the version the file has (a continuation from a mirror without an
        /// expected checksum): another version fails the request instead of starting the file again.
        var sameVersionOnly = false
        /// Whether it opens a connection with a whole window, to be cut short (`RequestEnd.cutShort`) if it would
        /// spin long (`FirstRequestBudget`).
        var cutWhenSlow = false

        /// The first byte the `Range` header names.
        var requestStart: Int64 { start - Int64(overlap) }
        /// The bytes from `start` it asks for (`nil` without a `Range`).
        var length: Int64? { end.map { $0 - start + 1 } }
    }

    /// What a request's sink saw, handed back when the request ended.
    struct Report: Sendable {
        /// The network side, after the request's accepted bytes.
        var position: TransferPosition
        var respondingURL: URL?
        var isWholeStream = false
        var isOtherVersion = false
        /// Body bytes received, the overlap included.
        var received: Int64 = 0
        var peakUnwritten: Int64 = 0
        var hashFellBehind = false
    }

    /// What the executor does next; the comment says which event answers it. (Errors compare by their code.)
    enum Action: Sendable, Equatable {
        /// Nothing to carry out: `next(warmConnection:)` (or `cancel()` when the task was cancelled).
        case proceed
        /// Send this GET; `requestEnded(_:report:)`.
        case request(Window)
        /// Fetch every missing byte over several connections: `startSegments()`, then its events until every connection
        /// is idle; `segmentsEnded()`.
        case fetchSegments(connections: Int)
        /// Empty the partial file and the hash (`DiskCommand.startOver`) and save this metadata, telling the caller
        /// why (`reason`, a warning); then `proceed`.
        case startOver(announced: [Checksum], metadata: ResourceMetadata, reason: String)
        /// Tell the user (bytes were not used, or ranges given up); then `proceed`.
        case warn(String)
        /// Save this checkpoint, if any, and wait until the disk is past the middle of the last window;
        /// `diskPassedMark(failure:)`.
        case waitForDisk(checkpoint: ResourceMetadata?)
        /// Wait until everything received is written, then save this metadata; `diskPassedMark(failure:)`.
        case drainThenCheckpoint(ResourceMetadata)
        /// Every byte is in: check lengths and the digest; `digestChecked(mismatch:)`.
        case verify
        /// The file is right: move it into the completed area.
        case place
        /// End early, keeping the partial file and its state for the next run.
        case stop(DownloadError)
        /// End early, deleting the partial file (nothing in it can be used again).
        case discard(DownloadError)
    }
}
