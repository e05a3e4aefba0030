import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a state folder records, read without a manager: without the lock, and without changing a byte (`dl --list`
/// while another `dl` runs on the folder).
extension DownloadManager {
    /// One download as its state folder records it.
    public struct SavedDownload: Sendable, Equatable {
        /// The download's URL (as requested; credentials are never saved).
        public let url: URL
        /// The saved state; a download saved as queued or downloading whose folder no manager holds any more (its
        /// process was killed) is `.suspended`, as the next manager will find it. A queued download in its first
        /// second of downloading is still saved as queued.
        public let state: DownloadState
        /// The file's name: where it went, else the name it will get (the server's or the URL's).
        public let name: String
        /// The bytes on disk: the partial file's length, or the completed file's.
        public let bytesOnDisk: Int64
        /// The file's length, when the server said it.
        public let totalBytes: Int64?
        /// Whether a rerun continues from the bytes on disk: `false` for an unfinished download whose server sends the
        /// whole body in one response (no Range, or no validator to send as `If-Range`) — the rerun fetches it again.
        public var resumable = true
        /// It was asked with credentials, which are never saved: a rerun must give them again.
        public var needsCredentials = false
        /// What holds for it: its rate limit, connections and expected checksum (`nil`: none saved).
        public var maximumBytesPerSecond: Int?
        /// Connections per file (`DownloadOptions.connections`).
        public var connections: Int?
        /// The checksum the file is checked against.
        public var expectedChecksum: Checksum?
    }

    /// Reads the downloads a state folder records, in the order they were first requested.
    /// - Parameter stateDirectory: the state folder (`Configuration.stateDirectory`, `dl`'s `DIR/.dl`).
    /// - Returns: the downloads (none when there is no journal), and whether a manager holds the folder now.
    public static func savedDownloads(in stateDirectory: URL) -> (downloads: [SavedDownload], inUse: Bool) {
        let inUse = isLocked(stateDirectory.appendingPathComponent("lock"))
        guard let data = readWithoutFollowing(stateDirectory.appendingPathComponent(ReceiptJournal.name)) else {
            return ([], inUse)
        }
        // The lines as the manager reads them: a torn last line and removed downloads are left out.
        let layout = DownloadDirectory(root: stateDirectory.deletingLastPathComponent(), state: stateDirectory)
        var downloads: [SavedDownload] = []
        for line in ReceiptJournal.Lines(data).entries(in: data).entries {
            let entry = line.entry
            // A batch's download at its placement is finished and forgotten once placed (no removal line follows):
            // left out, unless a crash left its verified partial file unmoved (the next manager shows it suspended).
            if entry.placement != nil, entry.forgetsWhenPlaced == true,
                inUse || FileManager.default.sizeOfItem(at: layout.partialFile(for: entry.url)) == nil
            {
                continue
            }
            var state = entry.state
            if !inUse && (state == .queued || state == .downloading) { state = .suspended }
            let name =
                entry.options.destination?.lastPathComponent ?? entry.filename
                ?? DownloadDirectory.finalName(
                    naming: entry.options.naming, url: entry.url, suggested: entry.suggestedFilename)
            let onDisk =
                state == .completed
                ? (entry.totalBytesExpected ?? 0)
                : (FileManager.default.sizeOfItem(at: layout.partialFile(for: entry.url)) ?? 0)
            // The partial file's state knows the length when the journal does not yet (a run killed early).
            let stateFile = layout.stateFile(for: entry.url)
            let saved = state == .completed ? nil : Self.partialState(stateFile, url: entry.url)
            var download = SavedDownload(
                url: entry.url, state: state, name: name, bytesOnDisk: onDisk,
                totalBytes: entry.totalBytesExpected ?? saved?.totalLength)
            download.needsCredentials = entry.credentialsNotSaved == true
            download.maximumBytesPerSecond = entry.options.maximumBytesPerSecond
            download.connections = entry.options.connections
            download.expectedChecksum = entry.expectations.own
            // A partial file without a usable state cannot be continued; a state without bytes says what its server
            // is (the bytes of one that ignores Range are not kept).
            if state != .completed && (onDisk > 0 || saved != nil) {
                download.resumable = saved.map { $0.rangesSupported && $0.validators.ifRange != nil } ?? false
            }
            downloads.append(download)
        }
        return (downloads, inUse)
    }

    /// The saved transfer state of a partial file, when it is there and valid. A rerun continues from the partial
    /// file when its server takes Range with a validator to send as `If-Range`.
    private static func partialState(_ stateFile: URL, url: URL) -> PartialState? {
        guard let data = readWithoutFollowing(stateFile), case .valid(let state) = PartialState.decode(data, for: url)
        else { return nil }
        return state
    }

    /// A file's bytes, never through a symbolic link; `nil` when it cannot be read.
    private static func readWithoutFollowing(_ file: URL) -> Data? {
        let fd = open(file.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return data }
            data.append(contentsOf: buffer[0..<count])
        }
    }

    /// Whether a process holds an advisory lock on the file: on Linux `/proc/locks` lists every `flock` with its
    /// inode, seen without taking it; elsewhere (Darwin has no `/proc`) a shared `flock` is tried without waiting and
    /// given back at once: refused, a process holds the lock. (A process taking the lock in that microsecond is told
    /// the folder is busy, as when another process has it.)
    private static func isLocked(_ lockFile: URL) -> Bool {
        var status = stat()
        guard lstat(lockFile.path, &status) == 0 else { return false }
        #if os(Linux)
            // Read to its end by read(2): a /proc file reports no size, and Foundation may stop at the first page.
            guard let data = readWithoutFollowing(URL(fileURLWithPath: "/proc/locks")) else { return true }
            let locks = String(decoding: data, as: UTF8.self)
            let inode = String(status.st_ino)
            return locks.split(separator: "\n").contains { line in
                let fields = line.split(separator: " ")
                return fields.contains("FLOCK")
                    && fields.contains { $0.split(separator: ":").last.map(String.init) == inode }
            }
        #else
            return probeLock(lockFile)
        #endif
    }

    /// Whether a process holds an exclusive `flock` on the file, found by trying a shared one without waiting (and
    /// giving it back at once). Darwin's way; compiled everywhere so that Linux tests it too.
    static func probeLock(_ lockFile: URL) -> Bool {
        let fd = open(lockFile.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return errno != ENOENT }
        defer { _ = close(fd) }
        guard flock(fd, LOCK_SH | LOCK_NB) == 0 else { return errno == EWOULDBLOCK }
        _ = flock(fd, LOCK_UN)
        return false
    }
}

/// Downloads as APIs and user interfaces show them (`DownloadSnapshot`): by URL, by identifier, a page at a time.
extension DownloadManager {
    /// The snapshot of a URL's download, if the manager knows it.
    public func snapshot(for url: URL) -> DownloadSnapshot? {
        receipt(for: url).map { DownloadSnapshot($0, completedDirectory: directory.completedArea) }
    }

    /// The snapshot of the download whose identifier is `identifier` (`DownloadReceipt.identifier`), if known.
    public func snapshot(identifiedBy identifier: String) -> DownloadSnapshot? {
        receipt(identifiedBy: identifier).map { DownloadSnapshot($0, completedDirectory: directory.completedArea) }
    }

    /// A page of snapshots in the order the downloads were first requested (see `receipts(after:limit:)`).
    /// - Parameters:
    ///   - cursor: `nil` for the first page, else the `next` of the page before.
    ///   - limit: at most this many snapshots (at least 1).
    /// - Returns: the snapshots, and the cursor of the next page (`nil` after the last one).
    public func snapshots(
        after cursor: ReceiptCursor?, limit: Int
    ) -> (snapshots: [DownloadSnapshot], next: ReceiptCursor?) {
        let page = receipts(after: cursor, limit: limit)
        return (page.receipts.map { DownloadSnapshot($0, completedDirectory: directory.completedArea) }, page.next)
    }
}
