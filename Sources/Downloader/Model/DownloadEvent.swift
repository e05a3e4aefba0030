import Foundation

/// What `DownloadManager.events()` reports, for every download of the manager.
public enum DownloadEvent: Sendable, Hashable {
    /// The receipt's state changed (for example `queued` → `downloading`).
    case stateChanged(DownloadReceipt)
    /// Bytes arrived: counts, fraction, speed and ETA (at most 10 events a second per download).
    case progress(DownloadReceipt)
    /// The download and its files were removed.
    case removed(URL)
    /// The receipts could not be saved (a full disk, …); downloads go on, and saving is retried every second and with
    /// every change. `url` is the receipts journal.
    case receiptsSaveFailed(DownloadError)
    /// The receipts are saved again after `receiptsSaveFailed`; the URL is the receipts journal.
    case receiptsSaved(URL)

    /// The URL the event is about.
    public var url: URL {
        switch self {
        case .stateChanged(let receipt), .progress(let receipt): return receipt.url
        case .removed(let url), .receiptsSaved(let url): return url
        case .receiptsSaveFailed(let error): return error.url ?? URL(fileURLWithPath: "/")
        }
    }

    /// The receipt, except for `.removed`.
    public var receipt: DownloadReceipt? {
        switch self {
        case .stateChanged(let receipt), .progress(let receipt): return receipt
        case .removed, .receiptsSaveFailed, .receiptsSaved: return nil
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
        case .receiptsSaveFailed(let error): return "receiptsSaveFailed(\(error))"
        case .receiptsSaved(let url): return "receiptsSaved(\(url.path))"
        }
    }
}
