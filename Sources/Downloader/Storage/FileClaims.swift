import Foundation

/// Which download each delivered file belongs to: a file belongs to at most one download of a manager, so removing
/// one download never deletes a file another still reports as its own.
///
/// A name is claimed before a verified file takes it (and kept only if it does), so two transfers that finish at the
/// same moment with identical files never end up sharing one. Keys are standardised paths. Shared by every copy of the
/// manager's `DownloadDirectory`.
final class FileClaims: Sendable {
    private let owners = Locked<[String: URL]>([:])

    /// Claims `file` for the download of `url`.
    /// - Returns: whether the file is now `url`'s: it was free, or already `url`'s.
    func claim(_ file: URL, for url: URL) -> Bool {
        let path = file.standardizedFileURL.path
        return owners.withLock { owners in
            if let owner = owners[path] { return owner == url }
            owners[path] = url
            return true
        }
    }

    /// Gives up `url`'s claim on `file` (another download's claim stays).
    func release(_ file: URL, of url: URL) {
        let path = file.standardizedFileURL.path
        owners.withLock { owners in
            if owners[path] == url { owners[path] = nil }
        }
    }

    /// The download that claims `file`, if any.
    func owner(of file: URL) -> URL? {
        let path = file.standardizedFileURL.path
        return owners.withLock { $0[path] }
    }
}
