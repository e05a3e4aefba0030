/// Where a download is in its life.
///
/// Receipts saved by earlier versions load too: `none` reads as `.idle` and `willResume` as `.queued`.
public enum DownloadState: String, Sendable, Codable, CaseIterable {
    /// Known but never started.
    case idle
    /// Waiting for a free slot; it starts on its own.
    case queued
    /// Transferring now.
    case downloading
    /// Paused (by the user, or found unfinished after a restart); the partial file and hash state are kept.
    case suspended
    /// Whole and verified, in the completed area.
    case completed
    /// Stopped on an error (see the receipt's `error`); the partial file is kept when it is still valid.
    case failed

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        switch text {
        case "none": self = .idle
        case "willResume": self = .queued
        default:
            guard let state = DownloadState(rawValue: text) else {
                throw DecodingError.dataCorrupted(
                    .init(codingPath: decoder.codingPath, debugDescription: "unknown download state \"\(text)\""))
            }
            self = state
        }
    }

    /// Whether nothing happens to the download until someone asks: idle, suspended, completed or failed.
    public var isResting: Bool {
        switch self {
        case .idle, .suspended, .completed, .failed: return true
        case .queued, .downloading: return false
        }
    }
}
