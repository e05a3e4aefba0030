import Dispatch
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
/// A name is claimed with `renameat2(RENAME_NOREPLACE)` on Linux, else `link(2)`: both fail if the name exists, so two
/// transfers that choose the same name at the same moment cannot overwrite each other. After a link the partial name is
/// unlinked; between the two a crash leaves both names on one inode, which recovery recognises. Before each claim,
/// `willClaim` records where the file is going (the manager writes it to its journal), so a crash at any moment of the
/// move is recognised at the next start.
/// A file already at the name with the same length and checksum is the same file (a rerun after the state was
/// cleaned up): it is taken as the result instead of making a `name (1)` copy — unless another download of the
/// manager claims it (`FileClaims`) or its extended attributes name another URL (a file another download delivered,
/// perhaps forgotten since: the user's now): a file belongs to one download, so that removing one never deletes
/// another's.
enum FilePlacement {
    /// The verified file to place.
    enum Source {
        /// A download's partial file, reached through the state folder.
        case partial(PartialFiles)
        /// A file at a path (a completed file that moves, or a copy of one).
        case file(URL)

        /// Links it at `target` (which must not exist). - Returns: 0 or `errno`.
        func link(to target: URL) -> Int32 {
            switch self {
            case .partial(let files): return files.folder.link(files.partialName, in: .partial, to: target)
            case .file(let url): return posixLink(url, target)
            }
        }

        /// Moves it to `target` unless something is there, in one call. - Returns: 0 or `errno`; `nil` when that
        /// cannot be done so (link it, then unlink it).
        func moveIfAbsent(to target: URL) -> Int32? {
            switch self {
            case .partial(let files): return files.folder.moveIfAbsent(files.partialName, in: .partial, to: target)
            case .file: return nil
            }
        }

        /// Renames it to `target`, replacing what is there. - Returns: 0 or `errno`.
        func rename(to target: URL) -> Int32 {
            switch self {
            case .partial(let files): return files.folder.move(files.partialName, in: .partial, to: target)
            case .file(let url): return posixRename(url, target)
            }
        }

        /// Removes its name.
        func unlink() {
            switch self {
            case .partial(let files): files.removePartial()
            case .file(let url): posixUnlink(url)
            }
        }

        /// Opens it for reading.
        func openForReading(downloadURL: URL) throws(DownloadError) -> Int32 {
            switch self {
            case .partial(let files):
                return try files.openPartial(.read)
            case .file(let url):
                let fd = open(url.path, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else {
                    throw .fileSystem(
                        downloadURL, reason: "cannot read \(url.path): \(POSIXError.current.localizedDescription)")
                }
                return fd
            }
        }
    }

    /// Where the file goes.
    enum Target {
        /// Replace this file (the download's own completed file, or a name that belongs to the URL).
        case replace(URL)
        /// The first free name among `name`, `name (1)`, … in `area`.
        case unique(area: URL, name: String)
    }

    /// Why a file cannot be placed at `destination`: it is a folder (checked before a transfer starts and before a
    /// completed file moves there, off the manager's actor). `nil` when it is not.
    static func folderRefusal(at destination: URL, downloadURL: URL) -> DownloadError? {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: destination.path, isDirectory: &isDirectory),
            isDirectory.boolValue
        else { return nil }
        return .fileSystem(downloadURL, reason: "the destination \(destination.path) is a folder")
    }

    /// Places the verified file.
    /// - Parameters:
    ///   - source: the verified file.
    ///   - target: where it goes.
    ///   - length: its length.
    ///   - checksum: its checksum, if it was hashed (needed to recognise an identical file).
    ///   - downloadURL: the download the file belongs to (its claim), and for error messages.
    ///   - claims: which download each delivered file belongs to; the placed file is claimed for `downloadURL`.
    ///   - willClaim: called with each path, and its file name, just before it is claimed.
    /// - Returns: the file's final location and its file name.
    /// - Throws: `DownloadError.fileSystem`; the source is then where it was.
    static func place(
        _ source: Source, at target: Target, length: Int64, checksum: Checksum?, downloadURL: URL,
        claims: FileClaims, willClaim: (_ file: URL, _ name: String) -> Void
    ) throws(DownloadError) -> (file: URL, name: String) {
        switch target {
        case .replace(let file):
            guard claims.claim(file, for: downloadURL) else {
                throw .fileSystem(
                    downloadURL,
                    reason:
                        "\(file.path) is the file of another download (\(claims.owner(of: file)?.redactedAbsoluteString ?? "?"))"
                )
            }
            let name = file.fileName
            willClaim(file, name)
            try move(source, over: file, downloadURL: downloadURL)
            return (file, name)
        case .unique(let area, let name):
            // A copy beside the target when the area is on another file system; removed unless it was placed.
            var copy: URL?
            defer { if let copy { posixUnlink(copy) } }
            // A candidate is one sanitised name: its path is the area's, a slash and the name. `appendingPathComponent`
            // re-parses the whole URL (14,000 instructions a call, three times `URL(fileURLWithPath:)`; issue #52).
            let areaPath = area.filePath
            let prefix = areaPath.hasSuffix("/") ? areaPath : areaPath + "/"
            for candidate in DownloadDirectory.candidateNames(for: name) {
                let file = URL(fileURLWithPath: prefix + candidate, isDirectory: false)
                // Reserved before the name is taken, kept only if the file is placed there.
                guard claims.claim(file, for: downloadURL) else { continue }
                var placed = false
                defer { if !placed { claims.release(file, of: downloadURL) } }
                willClaim(file, candidate)
                let moved = copy == nil ? source.moveIfAbsent(to: file) : nil
                var code = moved ?? copy.map { posixLink($0, file) } ?? source.link(to: file)
                if code == EXDEV && copy == nil {
                    // Another file system: copy beside the target first, then claim names for the copy.
                    copy = try copyBeside(file, from: source, downloadURL: downloadURL)
                    code = posixLink(copy!, file)
                }
                switch code {
                case 0:
                    if moved != 0 { source.unlink() }  // linked: the partial name goes
                    placed = true
                    return (file, candidate)
                case EEXIST:
                    if isIdentical(file, length: length, checksum: checksum),
                        !FileRecord.recordsAnotherOrigin(at: file, than: downloadURL)
                    {
                        source.unlink()
                        placed = true
                        return (file, candidate)
                    }
                case EPERM, ENOTSUP, EOPNOTSUPP:
                    // A file system without hard links: check, then rename (racy only against other writers there).
                    guard !FileManager.default.fileExists(atPath: file.path) else { continue }
                    if let placed = copy {
                        try move(.file(placed), over: file, downloadURL: downloadURL)
                        copy = nil
                        source.unlink()
                    } else {
                        try move(source, over: file, downloadURL: downloadURL)
                    }
                    placed = true
                    return (file, candidate)
                default:
                    throw .fileSystem(
                        downloadURL,
                        reason:
                            "cannot move the verified file to \(file.path): \(POSIXError(code).localizedDescription)")
                }
            }
            throw .fileSystem(downloadURL, reason: "no free name for \(name) in \(area.path)")
        }
    }

    /// Whether `file` is the same content: a regular file (not a link to one) of the same length and checksum.
    private static func isIdentical(_ file: URL, length: Int64, checksum: Checksum?) -> Bool {
        var info = stat()
        guard let checksum, lstat(file.path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG,
            Int64(info.st_size) == length
        else { return false }
        return (try? FileDigest.checksum(of: file, algorithm: checksum.algorithm)) == checksum
    }

    /// `rename(2)`, or a copy beside the target and a rename across file systems.
    private static func move(_ source: Source, over file: URL, downloadURL: URL) throws(DownloadError) {
        let code = source.rename(to: file)
        if code == 0 { return }
        guard code == EXDEV else {
            throw .fileSystem(
                downloadURL,
                reason: "cannot move the verified file to \(file.path): \(POSIXError(code).localizedDescription)")
        }
        let copy = try copyBeside(file, from: source, downloadURL: downloadURL)
        let renamed = posixRename(copy, file)
        guard renamed == 0 else {
            posixUnlink(copy)
            throw .fileSystem(
                downloadURL,
                reason: "cannot move the verified file to \(file.path): \(POSIXError(renamed).localizedDescription)")
        }
        source.unlink()
    }

    /// Copies `source` to a new temporary name in `file`'s directory (cleared by `AtomicFile.removeOrphans` after a
    /// crash).
    private static func copyBeside(_ file: URL, from source: Source, downloadURL: URL) throws(DownloadError) -> URL {
        let copy = AtomicFile.temporaryFile(beside: file)
        let input = try source.openForReading(downloadURL: downloadURL)
        defer { _ = closeDescriptor(input) }
        do {
            // The mode a new file gets (0666 less the umask), as the partial file had.
            let output = open(copy.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
            guard output >= 0 else { throw POSIXError.current }
            defer { _ = closeDescriptor(output) }
            var length = stat()
            guard fstat(input, &length) == 0 else { throw POSIXError.current }
            var failure: DownloadError?
            try FileReader.read(input, from: 0, to: Int64(length.st_size), file: copy, url: downloadURL) { bytes in
                guard failure == nil else { return }
                do { try AtomicFile.writeAll(output, bytes) } catch {
                    failure = .fileSystem(downloadURL, reason: "\(error.localizedDescription)")
                }
            }
            if let failure { throw failure }
        } catch {
            posixUnlink(copy)
            throw .fileSystem(
                downloadURL, reason: "cannot copy the verified file to \(file.path): \(error.localizedDescription)")
        }
        return copy
    }
}

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
        let path = Self.standardizedPath(of: file)
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

    /// `file.standardizedFileURL.path`, without building a URL when the path has nothing to remove: an absolute path
    /// with no empty, `.` or `..` component and no trailing slash is its own standard form (`standardizedFileURL`
    /// cost 25,000 instructions a look-up; issue #52).
    static func standardizedPath(of file: URL) -> String {
        var path = file.filePath
        let plain = path.withUTF8 { bytes -> Bool in
            guard bytes.count > 1, bytes[0] == UInt8(ascii: "/"), bytes[bytes.count - 1] != UInt8(ascii: "/") else {
                return false
            }
            // Each component starts after a slash: it must not be empty, `.` or `..`.
            var index = 0
            while index < bytes.count {
                let start = index + 1  // after the slash at `index`
                var end = start
                while end < bytes.count, bytes[end] != UInt8(ascii: "/") { end += 1 }
                let length = end - start
                if length == 0 { return false }
                if length <= 2, bytes[start] == UInt8(ascii: "."), length == 1 || bytes[start + 1] == UInt8(ascii: ".")
                {
                    return false
                }
                index = end
            }
            return true
        }
        return plain ? path : file.standardizedFileURL.path
    }
}

/// One serial queue for the manager's file clean-ups (deleting partial, state and completed files), so that the
/// actor never waits on the disk and a transfer can start after every clean-up queued before it (`barrier()`).
final class FileWorkQueue: Sendable {
    private let queue = DispatchQueue(label: "Downloader.FileWorkQueue")
    /// Work queued and not yet done: `barrier()` with none waits for nothing (every transfer's start asks; issue #52).
    private let pending = Locked(0)

    /// Runs `work` after everything queued before it.
    func async(_ work: @escaping @Sendable () -> Void) {
        pending.withLock { $0 += 1 }
        queue.async { [pending] in
            work()
            pending.withLock { $0 -= 1 }
        }
    }

    /// Runs `work` after everything queued before it and returns what it returned.
    func run<Value: Sendable>(_ work: @escaping @Sendable () -> Value) async -> Value {
        await withCheckedContinuation { continuation in
            self.async { continuation.resume(returning: work()) }
        }
    }

    /// Returns once everything queued before this call has run: at once when nothing is queued.
    func barrier() async {
        guard pending.withLock({ $0 }) > 0 else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async { continuation.resume() }
        }
    }
}
