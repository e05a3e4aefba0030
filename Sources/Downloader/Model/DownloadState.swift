/// Where a download is in its life.
public enum DownloadState: String, Sendable, Codable, CaseIterable {
    /// Known but never started.
    case none
    /// Waiting for a free slot; it starts on its own.
    case willResume
    /// Transferring now.
    case downloading
    /// Paused (by the user, or found unfinished after a restart); the partial file and hash state are kept.
    case suspended
    /// Whole and verified, in the completed area.
    case completed
    /// Stopped on an error (see the receipt's `error`); the partial file is kept when it is still valid.
    case failed
}
