import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What identifies a partial file's content without reading it: length, inode and modification time. A saved state
/// records it; a partial file whose identity changed since (bytes written after the state, a crash, an edit) is
/// checked against the saved hash before any of it is reused.
struct FileIdentity: Codable, Sendable, Equatable {
    var size: Int64
    var inode: UInt64
    var device: UInt64
    /// Nanoseconds since 1970.
    var modified: Int64

    init(_ info: stat) {
        size = Int64(info.st_size)
        inode = UInt64(info.st_ino)
        device = UInt64(info.st_dev)
        #if canImport(Darwin)
            modified = Int64(info.st_mtimespec.tv_sec) * 1_000_000_000 + Int64(info.st_mtimespec.tv_nsec)
        #else
            modified = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        #endif
    }

    /// The identity of an open file.
    init?(descriptor: Int32) {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        self.init(info)
    }
}

/// This boot of the machine, when the system tells (Linux: `/proc/sys/kernel/random/boot_id`). A state saved in the
/// same boot saw a page cache that is still there: bytes written after it and never synced are still the bytes this
/// process wrote. After a power loss or a reboot, only synced bytes can be trusted.
enum Boot {
    static let identifier: String? = {
        #if os(Linux)
            let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)
            return text?.trimmingCharacters(in: .whitespacesAndNewlines).nilIfEmpty
        #else
            var time = timeval()
            var size = MemoryLayout<timeval>.size
            guard sysctlbyname("kern.boottime", &time, &size, nil, 0) == 0 else { return nil }
            return "\(time.tv_sec).\(time.tv_usec)"
        #endif
    }()
}

extension String {
    fileprivate var nilIfEmpty: String? { isEmpty ? nil : self }
}

/// One download's two files in the partial area — `KEY.part`, the bytes so far, and `KEY.state`, its saved state —
/// reached only through the state folder's descriptor (see `StateFolder`).
struct PartialFiles: Sendable {
    let folder: StateFolder
    /// The MD5 of the download's URL.
    let key: String
    /// The download, for error messages.
    let url: URL

    init(folder: StateFolder, url: URL) {
        self.folder = folder
        self.url = url
        key = DownloadDirectory.key(for: url)
    }

    var partialName: String { key + ".part" }
    var stateName: String { key + ".state" }
    /// For messages and receipts.
    var partialURL: URL { folder.url(of: partialName, in: .partial) }

    /// How the partial file is opened.
    enum Access {
        /// Appending (created if missing).
        case append
        /// Writing at offsets (created if missing, never truncated).
        case positional
        /// Reading.
        case read
        /// A new empty file (created; an earlier one must have been removed).
        case create
    }

    /// Opens the partial file; a symbolic link planted in its place is never followed.
    /// - Returns: the descriptor; the caller closes it.
    /// - Throws: `DownloadError.fileSystem`.
    func openPartial(_ access: Access) throws(DownloadError) -> Int32 {
        let flags: Int32 =
            switch access {
            case .append: O_WRONLY | O_CREAT | O_APPEND
            case .positional: O_WRONLY | O_CREAT
            case .read: O_RDONLY
            case .create: O_WRONLY | O_CREAT | O_EXCL | O_APPEND
            }
        do {
            // The file becomes the user's: it gets the mode a new file gets (the state folder keeps it private).
            let fd = try folder.openFile(partialName, in: .partial, flags: flags, mode: 0o666)
            var info = stat()
            guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
                _ = closeDescriptor(fd)
                throw DownloadError.fileSystem(url, reason: "\(partialURL.path) is not a regular file")
            }
            return fd
        } catch let error as DownloadError {
            throw error
        } catch let error as POSIXError where error.code == .ELOOP {
            throw .fileSystem(url, reason: "\(partialURL.path) is a symbolic link; it is never written through")
        } catch {
            throw .fileSystem(url, reason: "cannot open \(partialURL.path): \(error.localizedDescription)")
        }
    }

    /// The partial file's identity, when it is a regular file.
    var partialIdentity: FileIdentity? {
        guard let info = folder.status(partialName, in: .partial), (info.st_mode & S_IFMT) == S_IFREG else {
            return nil
        }
        return FileIdentity(info)
    }

    /// The partial file's length, when it is a regular file.
    var partialSize: Int64? { partialIdentity?.size }

    func removePartial() {
        folder.remove(partialName, in: .partial)
    }

    func removeState() {
        folder.remove(stateName, in: .partial)
    }

    /// Whether a saved state exists (readable or not).
    var hasState: Bool { folder.status(stateName, in: .partial) != nil }

    /// Reads the saved state.
    func loadState() -> PartialState.Loaded {
        guard hasState else { return .missing }
        guard let data = folder.read(stateName, in: .partial) else {
            return .unusable(reason: "it is not a readable file")
        }
        return PartialState.decode(data, for: url)
    }

    /// Saves the state atomically, with its checksum; on a full disk, over the old state if it fits there.
    /// - Throws: `DownloadError.fileSystem`.
    func saveState(_ state: PartialState) throws(DownloadError) {
        var state = state
        state.url = state.url.withoutCredentials  // never saved with credentials
        do {
            try folder.write(state.encoded(), to: stateName, in: .partial, inPlaceWhenFull: true)
        } catch {
            throw .fileSystem(
                url, reason: "cannot save the transfer state \(stateName): \(error.localizedDescription)")
        }
    }
}
