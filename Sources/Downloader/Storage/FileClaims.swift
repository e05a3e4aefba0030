import Foundation

/// Which download each delivered file belongs to: a file belongs to at most one download of a manager, so removing
/// one download never deletes a file another still reports as its own.
///
/// A name is claimed before a verified file takes it (and kept only if it does), so two transfers that finish at the
/// same moment with identical files never end up sharing one. Keys are standardised paths; on Darwin, where a volume may
/// compare names without case (and always without Unicode normalisation), two names the volume takes for one file
/// are one key. Shared by every copy of the manager's `DownloadDirectory`.
final class FileClaims: Sendable {
    private let owners = Locked<[String: URL]>([:])
    #if canImport(Darwin)
        /// Whether each folder's volume tells names apart by case, asked once per folder.
        private let caseSensitiveFolders = Locked<[String: Bool]>([:])
    #endif

    /// Claims `file` for the download of `url`.
    /// - Returns: whether the file is now `url`'s: it was free, or already `url`'s.
    func claim(_ file: URL, for url: URL) -> Bool {
        let path = key(of: file)
        return owners.withLock { owners in
            if let owner = owners[path] { return owner == url }
            owners[path] = url
            return true
        }
    }

    /// Gives up `url`'s claim on `file` (another download's claim stays).
    func release(_ file: URL, of url: URL) {
        let path = key(of: file)
        owners.withLock { owners in
            if owners[path] == url { owners[path] = nil }
        }
    }

    /// The download that claims `file`, if any.
    func owner(of file: URL) -> URL? {
        let path = key(of: file)
        return owners.withLock { $0[path] }
    }

    /// The name the file system gives `file`, as a key: its standardised path, on Darwin folded as its volume folds.
    private func key(of file: URL) -> String {
        let path = file.standardizedFileURL.path
        #if canImport(Darwin)
            // APFS and HFS+ compare names without normalisation; most Macs' volumes compare them without case too.
            let folder = file.standardizedFileURL.deletingLastPathComponent()
            let caseSensitive = caseSensitiveFolders.withLock { known in
                if let answer = known[folder.path] { return answer }
                let values = try? folder.resourceValues(forKeys: [.volumeSupportsCaseSensitiveNamesKey])
                let answer = values?.volumeSupportsCaseSensitiveNames ?? false
                known[folder.path] = answer
                return answer
            }
            let normalised = path.precomposedStringWithCanonicalMapping
            return caseSensitive ? normalised : normalised.lowercased()
        #else
            return path
        #endif
    }
}
