import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// An exclusive advisory lock (`flock`) on a state directory, held by one manager for its life, so that two managers
/// (in one process or two) never write the same partial file or journal.
///
/// `flock` locks belong to an open file description, so a second manager in the same process is refused as well.
/// The lock file holds the owner's process id, for the message the next one gets. A lock file that was deleted and
/// re-created while this one waited is noticed (the inode changed) and the lock is taken again on the new file.
final class DirectoryLock: @unchecked Sendable {
    let file: URL
    private let lock = NSLock()
    private var fd: Int32

    private init(file: URL, fd: Int32) {
        self.file = file
        self.fd = fd
    }

    deinit {
        release()
    }

    /// Takes the lock.
    /// - Parameters:
    ///   - file: the lock file (created with mode 0600 if needed).
    ///   - timeout: how long to wait for another owner to let go; 0 fails at once. Waiting blocks the calling thread.
    /// - Throws: `DownloadError.directoryLocked` when another owner holds it; `.fileSystem` when the file cannot be
    ///   opened.
    static func acquire(_ file: URL, timeout: TimeInterval) throws(DownloadError) -> DirectoryLock {
        let deadline = Date().addingTimeInterval(max(0, timeout))
        while true {
            // The last owner may have removed the whole state folder (nothing unfinished was left in it).
            mkdir(file.deletingLastPathComponent().path, 0o700)
            let fd = open(file.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                throw .fileSystem(
                    nil, reason: "cannot open the lock \(file.path): \(POSIXError.current.localizedDescription)")
            }
            if flock(fd, LOCK_EX | LOCK_NB) == 0 {
                if isStillTheFile(fd, at: file) {
                    let lock = DirectoryLock(file: file, fd: fd)
                    lock.writeOwner()
                    return lock
                }
                close(fd)  // deleted by its last owner while we opened it: lock the new one
                continue
            }
            let busy = errno == EWOULDBLOCK || errno == EAGAIN
            let owner = readOwner(fd)
            close(fd)
            guard busy else {
                throw .fileSystem(nil, reason: "cannot lock \(file.path): \(POSIXError.current.localizedDescription)")
            }
            guard Date() < deadline else {
                throw .directoryLocked(file.deletingLastPathComponent(), owner: owner)
            }
            usleep(50_000)  // a bounded poll: flock has no timeout of its own
        }
    }

    /// Lets go of the lock. Idempotent.
    func release() {
        lock.lock()
        defer { lock.unlock() }
        guard fd >= 0 else { return }
        close(fd)
        fd = -1
    }

    /// Deletes the lock file while still holding the lock, then lets go (the state folder is being removed).
    func removeAndRelease() {
        lock.lock()
        defer { lock.unlock() }
        guard fd >= 0 else { return }
        unlink(file.path)
        close(fd)
        fd = -1
    }

    private func writeOwner() {
        let text = "\(getpid())\n"
        _ = ftruncate(fd, 0)
        _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
    }

    private static func readOwner(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = pread(fd, &buffer, 31, 0)
        guard count > 0 else { return nil }
        return Int32(
            String(decoding: buffer.prefix(count), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Whether the open descriptor is still the file at `path` (not one deleted meanwhile).
    private static func isStillTheFile(_ fd: Int32, at path: URL) -> Bool {
        var open = stat()
        var named = stat()
        guard fstat(fd, &open) == 0, stat(path.path, &named) == 0 else { return false }
        return open.st_ino == named.st_ino && open.st_dev == named.st_dev
    }
}
