import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The state folder and its partial area, opened once as directory descriptors: every state file is reached by name
/// relative to a folder this process opened itself (`openat`, `unlinkat`, `renameat`, `fstatat`), never through a
/// symbolic link, and a folder swapped for a link after it was opened changes nothing.
///
/// Opening refuses a state folder or partial area that is a symbolic link, not a folder, or owned by another user,
/// with an error that names it, and makes both private (0700). Anyone who can write the directory above could
/// otherwise point the state at their own files and have them written or deleted.
final class StateFolder: Sendable {
    /// Which of the two folders a name is in.
    enum Area: Sendable {
        case state, partial
    }

    /// The state folder (for messages, and to check it is still the folder at its path).
    let url: URL
    /// The partial area inside it.
    let partialURL: URL
    private let descriptors = Locked<(state: Int32, partial: Int32)?>(nil)
    /// Each area's last free-space measurement and what was claimed of it since (`freeBytesIfShort(of:in:)`).
    private let freeSpaceEstimates = Locked<[Area: FreeSpaceEstimate]>([:])

    /// A state folder at `url`; nothing is opened until `open()`.
    init(url: URL) {
        self.url = url
        partialURL = url.appendingPathComponent("partial", isDirectory: true)
    }

    deinit {
        close()
    }

    /// Creates the folders if needed (their parent must exist) and opens them; a second call does nothing.
    /// - Throws: `DownloadError.fileSystem` naming the folder that is a symbolic link, not a folder, or not ours.
    func open() throws(DownloadError) {
        _ = try opened()
    }

    /// Closes the folders; the next use opens them again (the folder at the path was removed and created anew).
    func close() {
        let old = descriptors.withLock { descriptors in
            defer { descriptors = nil }
            return descriptors
        }
        if let old {
            _ = closeDescriptor(old.partial)
            _ = closeDescriptor(old.state)
        }
    }

    /// The descriptor of an area, opening the folders first if needed.
    func descriptor(_ area: Area) throws(DownloadError) -> Int32 {
        let opened = try opened()
        return area == .state ? opened.state : opened.partial
    }

    /// The bytes free for an unprivileged writer on an area's file system: `fstatvfs` on its open descriptor, without
    /// building a path (on Darwin, the volume's capacity for important use, which counts purgeable space).
    /// - Returns: the bytes, `nil` when the folder cannot be opened or asked.
    func freeSpace(in area: Area) -> Int64? {
        #if canImport(Darwin)
            return FileManager.default.freeSpace(at: area == .state ? url : partialURL)
        #else
            guard let folder = try? descriptor(area) else { return nil }
            var info = statvfs()
            guard fstatvfs(folder, &info) == 0 else { return nil }
            return Int64(info.f_bavail) * Int64(info.f_frsize)
        #endif
    }

    /// Whether an area's file system lacks room for `needed` more bytes. A measurement serves the claims that fit in it
    /// for a second (`FreeSpaceEstimate`); a claim that does not fit is measured again, so the answer is never
    /// stricter than a fresh `fstatvfs`. Every file of a list paid for one call before (issue #52).
    /// - Parameters:
    ///   - needed: the bytes still to come.
    ///   - area: the area they go to.
    /// - Returns: the bytes free when they are fewer than `needed`; `nil` when there is room or it cannot be told.
    func freeBytesIfShort(of needed: Int64, in area: Area) -> Int64? {
        let now = ContinuousClock.now
        if freeSpaceEstimates.withLock({ $0[area]?.claim(needed, at: now) ?? false }) { return nil }
        guard let free = freeSpace(in: area) else { return nil }
        var estimate = FreeSpaceEstimate(measured: free, at: now)
        let fits = estimate.claim(needed, at: now)
        freeSpaceEstimates.withLock { $0[area] = estimate }
        return fits ? nil : free
    }

    /// The URL of a name in an area (for messages and receipts only: the file is never opened by it).
    func url(of name: String, in area: Area) -> URL {
        (area == .state ? url : partialURL).appendingPathComponent(name, isDirectory: false)
    }

    /// Whether the opened state folder and partial area are still the folders at their paths (not removed, or replaced,
    /// meanwhile).
    var isAtItsPath: Bool {
        guard let fds = descriptors.withLock({ $0 }) else { return false }
        var open = stat()
        var named = stat()
        guard fstat(fds.state, &open) == 0, lstat(url.path, &named) == 0,
            open.st_ino == named.st_ino && open.st_dev == named.st_dev
        else { return false }
        // The partial area too: the last owner removes it when it is empty, and the state folder stays when another
        // process created its lock file again meanwhile.
        guard fstat(fds.partial, &open) == 0, fstatat(fds.state, "partial", &named, AT_SYMLINK_NOFOLLOW) == 0 else {
            return false
        }
        return open.st_ino == named.st_ino && open.st_dev == named.st_dev
    }

    private func opened() throws(DownloadError) -> (state: Int32, partial: Int32) {
        if let open = descriptors.withLock({ $0 }) { return open }
        let state = try Self.openFolder(AT_FDCWD, url.path, shown: url)
        let partial: Int32
        do {
            partial = try Self.openFolder(state, "partial", shown: partialURL)
        } catch {
            _ = closeDescriptor(state)
            throw error
        }
        let kept = descriptors.withLock { descriptors -> (state: Int32, partial: Int32) in
            if let earlier = descriptors { return earlier }  // another thread opened them first
            descriptors = (state, partial)
            return (state, partial)
        }
        if kept.state != state {
            _ = closeDescriptor(partial)
            _ = closeDescriptor(state)
        }
        return kept
    }

    /// Creates (0700) and opens one folder without following a link, checking that it is a folder of this user's.
    private static func openFolder(_ parent: Int32, _ name: String, shown: URL) throws(DownloadError) -> Int32 {
        _ = mkdirat(parent, name, 0o700)
        let fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            var info = stat()
            if fstatat(parent, name, &info, AT_SYMLINK_NOFOLLOW) == 0, (info.st_mode & S_IFMT) == S_IFLNK {
                throw .fileSystem(
                    nil,
                    reason: "\(shown.path) is a symbolic link: download state is never reached through one (anyone "
                        + "who can write the folder above could point it at their files); remove it, or use another "
                        + "directory")
            }
            if code == ENOTDIR || code == ELOOP {
                throw .fileSystem(nil, reason: "\(shown.path) is not a folder; remove it, or use another directory")
            }
            throw .fileSystem(nil, reason: "cannot open \(shown.path): \(POSIXError(code).localizedDescription)")
        }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_uid == geteuid() else {
            _ = closeDescriptor(fd)
            throw .fileSystem(
                nil,
                reason: "\(shown.path) belongs to another user (uid \(info.st_uid)); download state must be the "
                    + "downloader's own: remove it, or use another directory")
        }
        _ = fchmod(fd, 0o700)  // private, whatever made it
        return fd
    }

    // MARK: - Files by name

    /// Opens a file of an area without following a link (`O_NOFOLLOW` and `O_CLOEXEC` are added).
    /// - Returns: the descriptor; the caller closes it.
    /// - Throws: `POSIXError` (`ELOOP` for a symbolic link), or the folder's `DownloadError`.
    func openFile(_ name: String, in area: Area, flags: Int32, mode: mode_t = 0o600) throws -> Int32 {
        let folder = try descriptor(area)
        let fd = openat(folder, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else { throw POSIXError.current }
        return fd
    }

    /// The status of a name in an area, without following a link; `nil` when there is nothing by that name.
    func status(_ name: String, in area: Area) -> stat? {
        guard let folder = try? descriptor(area) else { return nil }
        var info = stat()
        return fstatat(folder, name, &info, AT_SYMLINK_NOFOLLOW) == 0 ? info : nil
    }

    /// Removes a name from an area (a link is removed itself, never what it points to).
    /// - Returns: whether something was removed.
    @discardableResult
    func remove(_ name: String, in area: Area) -> Bool {
        guard let folder = try? descriptor(area) else { return false }
        return unlinkat(folder, name, 0) == 0
    }

    /// Removes the partial area if it is empty (a stranger's file keeps it).
    @discardableResult
    func removePartialAreaIfEmpty() -> Bool {
        guard let folder = try? descriptor(.state) else { return false }
        return unlinkat(folder, "partial", AT_REMOVEDIR) == 0
    }

    /// The names in an area (without `.` and `..`).
    func names(in area: Area) -> [String] {
        guard let folder = try? descriptor(area) else { return [] }
        let copy = dup(folder)
        guard copy >= 0, let stream = fdopendir(copy) else {
            if copy >= 0 { _ = closeDescriptor(copy) }
            return []
        }
        defer { closedir(stream) }
        rewinddir(stream)
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// The whole content of a regular file of an area; `nil` when there is none, or it is not a regular file.
    func read(_ name: String, in area: Area) -> Data? {
        guard let fd = try? openFile(name, in: area, flags: O_RDONLY | O_NONBLOCK) else { return nil }
        defer { _ = closeDescriptor(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return try? FileHandle(fileDescriptor: fd, closeOnDealloc: false).readToEnd() ?? Data()
    }

    /// Replaces a file of an area atomically (a temporary name, then `renameat`): a crash leaves the old content or
    /// the new one, plus at most a temporary file that `removeTemporaryFiles(in:)` clears.
    /// - Parameters:
    ///   - data: the whole content.
    ///   - name: the file.
    ///   - area: its folder.
    ///   - durable: `fsync` the file before the rename and the folder after it.
    ///   - inPlaceWhenFull: when the disk has no room for a new file, rewrite the old one in place if the new content
    ///     fits in what it already occupies (a torn write is then possible; callers check what they read).
    /// - Throws: `POSIXError`.
    func write(
        _ data: Data, to name: String, in area: Area, durable: Bool = false, inPlaceWhenFull: Bool = false
    ) throws {
        let folder = try descriptor(area)
        let temporary = ".\(name)\(AtomicFile.temporaryMarker)\(UUID().uuidString)"
        do {
            let fd = try openFile(temporary, in: area, flags: O_WRONLY | O_CREAT | O_EXCL)
            do {
                _ = fchmod(fd, 0o600)
                try data.withUnsafeBytes { try AtomicFile.writeAll(fd, $0) }
                if durable, syncFully(fd) != 0 { throw POSIXError.current }
            } catch {
                _ = closeDescriptor(fd)
                throw error
            }
            // Closed once, whatever close says: a second close of a failed one could close another thread's
            // descriptor that took the number meanwhile.
            guard closeDescriptor(fd) == 0 else { throw POSIXError.current }
            guard renameat(folder, temporary, folder, name) == 0 else { throw POSIXError.current }
            if durable { _ = syncFully(folder) }
        } catch let error as POSIXError where inPlaceWhenFull && (error.code == .ENOSPC || error.code == .EDQUOT) {
            unlinkat(folder, temporary, 0)
            // When the old file cannot take it (there is none: a first save; or it is too small), the disk's error
            // is the one to report, not the fallback's ("No such file or directory" for a first save).
            let full = error
            do { try rewriteInPlace(data, name: name, area: area) } catch { throw full }
        } catch {
            unlinkat(folder, temporary, 0)
            throw error
        }
    }

    /// Writes `data` over an existing file when it fits in the blocks the file already has (no allocation).
    private func rewriteInPlace(_ data: Data, name: String, area: Area) throws {
        let fd = try openFile(name, in: area, flags: O_WRONLY)
        defer { _ = closeDescriptor(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, Int64(info.st_blocks) * 512 >= data.count
        else { throw POSIXError(.ENOSPC) }
        try data.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            var done = 0
            while done < buffer.count {
                let written = pwrite(fd, base + done, buffer.count - done, off_t(done))
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { throw POSIXError.current }
                done += written
            }
        }
        guard ftruncate(fd, off_t(data.count)) == 0 else { throw POSIXError.current }
    }

    /// Deletes temporary files that a crash left in an area (only names of the forms this package writes: this type's
    /// temporary names, and a batch's spill file, `RequestSpill`). Call with the folder's lock held.
    func removeTemporaryFiles(in area: Area) {
        for name in names(in: area)
        where name.hasPrefix(".") && (name.contains(AtomicFile.temporaryMarker) || RequestSpill.isFileName(name)) {
            remove(name, in: area)
        }
    }

    /// Makes a hard link to a file of an area at `target` (a path outside the state folder; never replaced).
    /// - Returns: 0, or the `errno` of `linkat`.
    func link(_ name: String, in area: Area, to target: URL) -> Int32 {
        guard let folder = try? descriptor(area) else { return ENOENT }
        return linkat(folder, name, AT_FDCWD, target.filePath, 0) == 0 ? 0 : errno
    }

    /// Moves a file of an area to `target` unless something is there: `renameat2(RENAME_NOREPLACE)`, one call where
    /// `linkat` and `unlinkat` took two, and no moment with both names (issue #52).
    /// - Returns: 0 or the `errno`; `nil` where the kernel, the C library or the file system cannot (the caller links
    ///   instead).
    func moveIfAbsent(_ name: String, in area: Area, to target: URL) -> Int32? {
        #if os(Linux)
            guard let renameat2 = Self.renameat2, let folder = try? descriptor(area) else { return nil }
            if renameat2(folder, name, AT_FDCWD, target.filePath, 1 /* RENAME_NOREPLACE */) == 0 { return 0 }
            let code = errno
            return [EINVAL, ENOSYS, ENOTSUP, EOPNOTSUPP].contains(code) ? nil : code
        #else
            return nil
        #endif
    }

    #if os(Linux)
        private typealias Renameat2 =
            @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
        /// glibc's `renameat2(2)` (2.28; a GNU extension Swift's Glibc module does not import), found at run time.
        private static let renameat2: Renameat2? = dlsym(nil, "renameat2").map { unsafeBitCast($0, to: Renameat2.self) }
    #endif

    /// Renames a file of an area to `target`, replacing what is there.
    /// - Returns: 0, or the `errno` of `renameat`.
    func move(_ name: String, in area: Area, to target: URL) -> Int32 {
        guard let folder = try? descriptor(area) else { return ENOENT }
        return renameat(folder, name, AT_FDCWD, target.filePath) == 0 ? 0 : errno
    }

    /// Moves a file from a path into an area (taking over an old layout).
    /// - Returns: 0, or the `errno` of `renameat`.
    func moveIn(from source: URL, to name: String, in area: Area) -> Int32 {
        guard let folder = try? descriptor(area) else { return ENOENT }
        return renameat(AT_FDCWD, source.filePath, folder, name) == 0 ? 0 : errno
    }
}

/// An exclusive advisory lock (`flock`) on a state directory, held by one manager for its life, so that two managers
/// (in one process or two) never write the same partial file or journal.
///
/// `flock` locks belong to an open file description, so a second manager in the same process is refused as well.
/// The lock file holds the owner's process id, for the message the next one gets. It is opened through the state
/// folder's descriptor (a `lock` planted as a symbolic link is refused). A state folder or lock file that was removed
/// and created again while this one waited (its last owner cleaned up) is noticed, and the lock is taken again on the
/// new one.
final class DirectoryLock: Sendable {
    let folder: StateFolder
    /// The lock file's descriptor; -1 once released.
    private let fd: Locked<Int32>

    private init(folder: StateFolder, fd: Int32) {
        self.folder = folder
        self.fd = Locked(fd)
    }

    deinit {
        release()
    }

    /// Takes the lock.
    /// - Parameters:
    ///   - folder: the state folder (created with mode 0700 if needed; the lock file with 0600).
    ///   - timeout: how long to wait for another owner to let go; 0 fails at once. Waiting blocks the calling thread.
    /// - Throws: `DownloadError.directoryLocked` when another owner holds it; `.fileSystem` when the folder or the
    ///   file cannot be opened, or is a symbolic link.
    static func acquire(_ folder: StateFolder, timeout: TimeInterval) throws(DownloadError) -> DirectoryLock {
        let deadline = Date().addingTimeInterval(max(0, timeout))
        let shown = folder.url(of: "lock", in: .state)
        while true {
            // The last owner may have removed the whole state folder (nothing unfinished was left in it).
            try folder.open()
            let fd: Int32
            do {
                fd = try folder.openFile("lock", in: .state, flags: O_RDWR | O_CREAT)
            } catch let error as DownloadError {
                throw error
            } catch let error as POSIXError where error.code == .ELOOP {
                throw .fileSystem(nil, reason: "\(shown.path) is a symbolic link; the lock is never taken through one")
            } catch let error as POSIXError where error.code == .ENOENT {
                folder.close()  // the folder was removed after it was opened: open the new one
                continue
            } catch {
                throw .fileSystem(nil, reason: "cannot open the lock \(shown.path): \(error.localizedDescription)")
            }
            _ = fchmod(fd, 0o600)
            if flock(fd, LOCK_EX | LOCK_NB) == 0 {
                if folder.isAtItsPath && isStillTheFile(fd, named: "lock", in: folder) {
                    let lock = DirectoryLock(folder: folder, fd: fd)
                    lock.writeOwner()
                    return lock
                }
                _ = closeDescriptor(fd)  // removed by its last owner while we waited: lock the new one
                folder.close()
                continue
            }
            let busy = errno == EWOULDBLOCK || errno == EAGAIN
            let owner = readOwner(fd)
            _ = closeDescriptor(fd)
            guard busy else {
                throw .fileSystem(nil, reason: "cannot lock \(shown.path): \(POSIXError.current.localizedDescription)")
            }
            guard Date() < deadline else {
                throw .directoryLocked(folder.url, owner: owner)
            }
            usleep(50_000)  // a bounded poll: flock has no timeout of its own
        }
    }

    /// Lets go of the lock. Idempotent.
    func release() {
        fd.withLock { fd in
            guard fd >= 0 else { return }
            _ = closeDescriptor(fd)
            fd = -1
        }
    }

    /// Deletes the lock file while still holding the lock, then lets go (the state folder is being removed).
    func removeAndRelease() {
        fd.withLock { fd in
            guard fd >= 0 else { return }
            folder.remove("lock", in: .state)
            _ = closeDescriptor(fd)
            fd = -1
        }
    }

    private func writeOwner() {
        let text = "\(getpid())\n"
        fd.withLock { fd in
            _ = ftruncate(fd, 0)
            _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
        }
    }

    private static func readOwner(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = pread(fd, &buffer, 31, 0)
        guard count > 0 else { return nil }
        return Int32(
            String(decoding: buffer.prefix(count), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Whether the open descriptor is still the file with that name in the folder (not one deleted meanwhile).
    private static func isStillTheFile(_ fd: Int32, named name: String, in folder: StateFolder) -> Bool {
        var open = stat()
        guard fstat(fd, &open) == 0, let named = folder.status(name, in: .state) else { return false }
        return open.st_ino == named.st_ino && open.st_dev == named.st_dev
    }
}

/// A file system's free bytes as last measured, and the bytes claimed of them since: a claim that fits within a second
/// of the measurement needs no new one. Claims only subtract, so an estimate never shows more room than it measured.
struct FreeSpaceEstimate: Equatable, Sendable {
    /// How long a measurement serves.
    static let lifetime: Duration = .seconds(1)
    /// The bytes free when measured.
    let measured: Int64
    /// When it was measured.
    let measuredAt: ContinuousClock.Instant
    /// The bytes claimed since.
    private(set) var claimed: Int64 = 0

    /// - Parameters:
    ///   - measured: the bytes free.
    ///   - instant: when they were measured.
    init(measured: Int64, at instant: ContinuousClock.Instant) {
        self.measured = measured
        measuredAt = instant
    }

    /// Claims `needed` bytes if they fit in what is left of a measurement that still serves.
    /// - Parameters:
    ///   - needed: the bytes.
    ///   - now: the time of the claim.
    /// - Returns: whether they were claimed; `false` asks for a new measurement.
    mutating func claim(_ needed: Int64, at now: ContinuousClock.Instant) -> Bool {
        guard now - measuredAt < Self.lifetime, now >= measuredAt, needed <= measured - claimed else { return false }
        claimed += needed
        return true
    }
}
