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
