import Foundation

/// What `DownloadManager.events()` reports, for every download of the manager.
public enum DownloadEvent: Sendable, Hashable {
    /// The receipt's state changed (for example `queued` → `downloading`).
    case stateChanged(DownloadReceipt)
    /// The receipt changed without a change of state: bytes arrived (counts, fraction, speed and ETA, at most 10
    /// events a second per download), the last count of a transfer that stopped, or a completed file that moved to
    /// the name or destination a request asked for.
    case progress(DownloadReceipt)
    /// The download was removed (its files deleted) or forgotten (its completed file kept).
    case removed(URL)
    /// A transient fault (a lost connection, a stall, 408, 429, 5xx) interrupted the download; it resumes by Range
    /// after `delay` seconds. `attempt` counts the retries of this run from 1; `reason` is the fault.
    case retrying(URL, attempt: Int, delay: TimeInterval, reason: DownloadError)
    /// The receipts could not be saved (a full disk, …); downloads go on, and saving is retried every second and with
    /// every change. `url` is the receipts journal.
    case receiptsSaveFailed(DownloadError)
    /// The receipts are saved again after `receiptsSaveFailed`; the URL is the receipts journal.
    case receiptsSaved(URL)
    /// Something a person should know happened, and the download went on: bytes on disk that could not be trusted
    /// (a saved state that fails its checksum, a partial file changed on disk) were not used, and it started again.
    case warning(URL, reason: String)

    /// The URL the event is about: the download's, or for `.receiptsSaved` and `.receiptsSaveFailed` the receipts
    /// journal (a file URL; `file:///` only if a save error names no file, which the manager never emits).
    public var url: URL {
        switch self {
        case .stateChanged(let receipt), .progress(let receipt): return receipt.url
        case .removed(let url), .receiptsSaved(let url), .retrying(let url, _, _, _), .warning(let url, _): return url
        case .receiptsSaveFailed(let error): return error.url ?? URL(fileURLWithPath: "/")
        }
    }

    /// The receipt, for `.stateChanged` and `.progress`.
    public var receipt: DownloadReceipt? {
        switch self {
        case .stateChanged(let receipt), .progress(let receipt): return receipt
        case .removed, .receiptsSaveFailed, .receiptsSaved, .retrying, .warning: return nil
        }
    }
}

extension DownloadEvent {
    /// What an event is, without what it carries: for a stream of some kinds only (`DownloadManager.events(of:)`).
    public enum Kind: Sendable, Hashable, CaseIterable {
        case stateChanged, progress, removed, retrying, receiptsSaveFailed, receiptsSaved, warning
    }

    /// The event's kind.
    public var kind: Kind {
        switch self {
        case .stateChanged: return .stateChanged
        case .progress: return .progress
        case .removed: return .removed
        case .retrying: return .retrying
        case .receiptsSaveFailed: return .receiptsSaveFailed
        case .receiptsSaved: return .receiptsSaved
        case .warning: return .warning
        }
    }
}

extension DownloadEvent: CustomStringConvertible {
    /// The event with URLs' credentials hidden: safe to log.
    public var description: String {
        switch self {
        case .stateChanged(let receipt): return "stateChanged(\(receipt))"
        case .progress(let receipt): return "progress(\(receipt))"
        case .removed(let url): return "removed(\(url.redactedAbsoluteString))"
        case .retrying(let url, let attempt, let delay, let reason):
            return "retrying(\(url.redactedAbsoluteString), attempt: \(attempt), delay: \(delay), reason: \(reason))"
        case .receiptsSaveFailed(let error): return "receiptsSaveFailed(\(error))"
        case .receiptsSaved(let url): return "receiptsSaved(\(url.path))"
        case .warning(let url, let reason): return "warning(\(url.redactedAbsoluteString), \(reason))"
        }
    }
}
