import Foundation

/// What `DownloadManager.events()` reports, for every download of the manager.
public enum DownloadEvent: Sendable, Hashable {
    /// The receipt's state changed (for example `queued` → `downloading`).
    case stateChanged(DownloadReceipt)
    /// Bytes arrived: counts, fraction, speed and ETA (at most 10 events a second per download).
    case progress(DownloadReceipt)
    /// The download and its files were removed.
    case removed(URL)

    /// The URL the event is about.
    public var url: URL {
        switch self {
        case .stateChanged(let receipt), .progress(let receipt): return receipt.url
        case .removed(let url): return url
        }
    }

    /// The receipt, except for `.removed`.
    public var receipt: DownloadReceipt? {
        switch self {
        case .stateChanged(let receipt), .progress(let receipt): return receipt
        case .removed: return nil
        }
    }
}
