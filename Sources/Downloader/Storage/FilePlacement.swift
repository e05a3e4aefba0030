import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Moves a verified partial file to its final place, never over an unrelated file.
///
/// A name is claimed with `link(2)`, which fails if the name exists, so two transfers that choose the same name at
/// the same moment cannot overwrite each other; the partial name is unlinked afterwards. Between the two a crash
/// leaves both names on one inode, which recovery recognises. Before each claim, `willClaim` records where the file is
/// going (the manager writes it to its journal), so a crash at any moment of the move is recognised at the next start.
/// A file already at the name with the same length and checksum is the same file (a rerun after the state was
/// cleaned up): it is taken as the result instead of making a `name (1)` copy.
enum FilePlacement {
    /// Where the file goes.
    enum Target {
        /// Replace this file (the download's own completed file, or a name that belongs to the URL).
        case replace(URL)
        /// The first free name among `name`, `name (1)`, … in `area`.
        case unique(area: URL, name: String)
    }

    /// Places the verified file.
    /// - Parameters:
    ///   - partial: the verified file.
    ///   - target: where it goes.
    ///   - length: its length.
    ///   - checksum: its checksum, if it was hashed (needed to recognise an identical file).
    ///   - downloadURL: for error messages.
    ///   - willClaim: called with each path just before it is claimed.
    /// - Returns: the file's final location.
    /// - Throws: `DownloadError.fileSystem`; the partial file is then where it was.
    static func place(
        _ partial: URL, at target: Target, length: Int64, checksum: Checksum?, downloadURL: URL,
        willClaim: (URL) -> Void
    ) throws(DownloadError) -> URL {
        switch target {
        case .replace(let file):
            willClaim(file)
            try move(partial, over: file, downloadURL: downloadURL)
            return file
        case .unique(let area, let name):
            var source = partial
            defer { if source != partial { unlink(source.path) } }
            for candidate in DownloadDirectory.candidateNames(for: name) {
                let file = area.appendingPathComponent(candidate)
                willClaim(file)
                if link(source.path, file.path) == 0 {
                    unlink(partial.path)
                    return file
                }
                switch errno {
                case EEXIST:
                    if isIdentical(file, length: length, checksum: checksum) {
                        unlink(partial.path)
                        return file
                    }
                case EXDEV where source == partial:
                    // Another file system: copy beside the target first, then claim names for the copy.
                    source = try copyBeside(file, from: partial, downloadURL: downloadURL)
                    if link(source.path, file.path) == 0 {
                        unlink(partial.path)
                        return file
                    }
                    if errno == EEXIST, isIdentical(file, length: length, checksum: checksum) {
                        unlink(partial.path)
                        return file
                    }
                case let code where code == EPERM || code == ENOTSUP || code == EOPNOTSUPP:
                    // A file system without hard links: check, then rename (racy only against other writers there).
                    guard !FileManager.default.fileExists(atPath: file.path) else { continue }
                    try move(source, over: file, downloadURL: downloadURL)
                    if source != partial { unlink(partial.path) }
                    source = partial
                    return file
                default:
                    throw .fileSystem(
                        downloadURL,
                        reason:
                            "cannot move the verified file to \(file.path): \(POSIXError.current.localizedDescription)")
                }
            }
            throw .fileSystem(downloadURL, reason: "no free name for \(name) in \(area.path)")
        }
    }

    /// Whether `file` is the same content: same length, and the same checksum.
    private static func isIdentical(_ file: URL, length: Int64, checksum: Checksum?) -> Bool {
        guard let checksum, FileManager.default.sizeOfItem(at: file) == length else { return false }
        return (try? FileDigest.checksum(of: file, algorithm: checksum.algorithm)) == checksum
    }

    /// `rename(2)`, or a copy beside the target and a rename across file systems.
    private static func move(_ source: URL, over file: URL, downloadURL: URL) throws(DownloadError) {
        if rename(source.path, file.path) == 0 { return }
        guard errno == EXDEV else {
            throw .fileSystem(
                downloadURL,
                reason: "cannot move the verified file to \(file.path): \(POSIXError.current.localizedDescription)")
        }
        let copy = try copyBeside(file, from: source, downloadURL: downloadURL)
        guard rename(copy.path, file.path) == 0 else {
            let reason = POSIXError.current.localizedDescription
            unlink(copy.path)
            throw .fileSystem(downloadURL, reason: "cannot move the verified file to \(file.path): \(reason)")
        }
        unlink(source.path)
    }

    /// Copies `source` to a temporary name in `file`'s directory (cleared by `AtomicFile.removeOrphans` after a
    /// crash).
    private static func copyBeside(_ file: URL, from source: URL, downloadURL: URL) throws(DownloadError) -> URL {
        let copy = AtomicFile.temporaryFile(beside: file)
        do {
            try FileManager.default.copyItem(at: source, to: copy)
        } catch {
            try? FileManager.default.removeItem(at: copy)
            throw .fileSystem(
                downloadURL, reason: "cannot copy the verified file to \(file.path): \(error.localizedDescription)")
        }
        return copy
    }
}
