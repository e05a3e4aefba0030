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

    /// - Parameters:
    ///   - folder: the state folder.
    ///   - url: the download.
    ///   - key: the download's key (`DownloadDirectory.key(for:)`) when the caller has it already: an MD5 of the URL
    ///     less (issue #52).
    init(folder: StateFolder, url: URL, key: String? = nil) {
        self.folder = folder
        self.url = url
        self.key = key ?? DownloadDirectory.key(for: url)
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
        /// A new empty file (one left by an earlier run is removed first).
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
            let fd: Int32
            do {
                fd = try folder.openFile(partialName, in: .partial, flags: flags, mode: 0o666)
            } catch let error as POSIXError {
                // A file left by an earlier run is removed only when there is one: a fresh file cost an `unlink`
                // that found nothing (issue #52).
                guard access == .create, error.code == .EEXIST else { throw error }
                removePartial()
                fd = try folder.openFile(partialName, in: .partial, flags: flags, mode: 0o666)
            }
            // A file `O_EXCL` created is a new regular file (a name that is a link fails): no `fstat` to ask.
            if access == .create { return fd }
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

/// What must survive a crash to resume a partial file: how far the hash got, and which version of the resource the
/// bytes belong to. Saved atomically beside the partial file at every window and whenever a transfer stops, only
/// after the bytes it counts are durable (`fdatasync`), with a checksum of its own and the partial file's identity.
struct PartialState: Codable, Sendable, Equatable {
    /// The download's URL (a check that the state belongs to this file).
    var url: URL
    /// How many bytes `hash` has hashed; the partial file holds at least these bytes unless it was damaged.
    var hashedLength: Int64
    /// The hash of the first `hashedLength` bytes, with its algorithm; `nil` when the file was not hashed.
    var hash: StreamingHash?
    /// The validators of the version being downloaded.
    var validators: Validators
    /// The resource's length, if known.
    var totalLength: Int64?
    /// Whether the server honoured Range for this version.
    var rangesSupported: Bool
    /// The server's raw `Content-Disposition` file name, if any.
    var suggestedFilename: String?
    /// The whole file's checksums the server announced.
    var announced: [Checksum] = []
    /// Whether the file was already restarted once after a checksum mismatch.
    var restartedAfterMismatch: Bool = false
    /// Whether the server's ETags proved unreliable (backends that disagree): its answers are judged without them.
    var ignoresETag: Bool = false
    /// For a file fetched in segments: the byte ranges written after the first `hashedLength` bytes (sorted,
    /// disjoint, not touching it); `nil` for a file written from its start only.
    var segments: [Range<Int64>]?
    /// The partial file as it was when the state was saved; `nil` in states of earlier versions.
    var file: FileIdentity?
    /// The machine's boot when the state was saved (`Boot.identifier`).
    var boot: String?

    init(
        url: URL, hashedLength: Int64, hash: StreamingHash?, validators: Validators, totalLength: Int64?,
        rangesSupported: Bool, suggestedFilename: String? = nil, announced: [Checksum] = [],
        restartedAfterMismatch: Bool = false, ignoresETag: Bool = false, segments: [Range<Int64>]? = nil,
        file: FileIdentity? = nil, boot: String? = nil
    ) {
        self.url = url.withoutCredentials  // never saved with credentials
        self.hashedLength = hashedLength
        self.hash = hash
        self.validators = validators
        self.totalLength = totalLength
        self.rangesSupported = rangesSupported
        self.suggestedFilename = suggestedFilename
        self.announced = announced
        self.restartedAfterMismatch = restartedAfterMismatch
        self.ignoresETag = ignoresETag
        self.segments = segments
        self.file = file
        self.boot = boot
    }

    private enum CodingKeys: String, CodingKey {
        case url, hashedLength, hash, validators, totalLength, rangesSupported, suggestedFilename, announced
        case restartedAfterMismatch, ignoresETag, segments, file, boot
        case md5, announcedMD5  // written by earlier versions
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        url = try container.decode(URL.self, forKey: .url)
        hashedLength = try container.decode(Int64.self, forKey: .hashedLength)
        hash =
            try container.decodeIfPresent(StreamingHash.self, forKey: .hash)
            ?? container.decodeIfPresent(MD5.self, forKey: .md5).map(StreamingHash.md5)
        validators = try container.decode(Validators.self, forKey: .validators)
        totalLength = try container.decodeIfPresent(Int64.self, forKey: .totalLength)
        rangesSupported = try container.decode(Bool.self, forKey: .rangesSupported)
        suggestedFilename = try container.decodeIfPresent(String.self, forKey: .suggestedFilename)
        announced =
            try container.decodeIfPresent([Checksum].self, forKey: .announced)
            ?? (container.decodeIfPresent(String.self, forKey: .announcedMD5).flatMap { Checksum(md5: $0) }.map { [$0] }
                ?? [])
        restartedAfterMismatch = try container.decodeIfPresent(Bool.self, forKey: .restartedAfterMismatch) ?? false
        ignoresETag = try container.decodeIfPresent(Bool.self, forKey: .ignoresETag) ?? false
        segments = try container.decodeIfPresent([Range<Int64>].self, forKey: .segments)
        file = try container.decodeIfPresent(FileIdentity.self, forKey: .file)
        boot = try container.decodeIfPresent(String.self, forKey: .boot)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(url, forKey: .url)
        try container.encode(hashedLength, forKey: .hashedLength)
        try container.encodeIfPresent(hash, forKey: .hash)
        try container.encode(validators, forKey: .validators)
        try container.encodeIfPresent(totalLength, forKey: .totalLength)
        try container.encode(rangesSupported, forKey: .rangesSupported)
        try container.encodeIfPresent(suggestedFilename, forKey: .suggestedFilename)
        try container.encode(announced, forKey: .announced)
        try container.encode(restartedAfterMismatch, forKey: .restartedAfterMismatch)
        if ignoresETag { try container.encode(ignoresETag, forKey: .ignoresETag) }
        try container.encodeIfPresent(segments, forKey: .segments)
        try container.encodeIfPresent(file, forKey: .file)
        try container.encodeIfPresent(boot, forKey: .boot)
    }

    /// What reading a saved state found.
    enum Loaded: Sendable, Equatable {
        /// There is none.
        case missing
        /// A state whose checksum matches (or, from an earlier version, one without a checksum: its `file` is then
        /// `nil` and its segments are dropped, so nothing of it is trusted without hashing it again).
        case valid(PartialState)
        /// A state that must not be used: changed or torn (its checksum does not match), unreadable, or another
        /// URL's.
        case unusable(reason: String)
    }

    /// The file's form: the state and the SHA-256 of its canonical encoding.
    private struct Envelope: Codable {
        var state: PartialState
        var sha256: String
    }

    /// The canonical encoding the checksum covers (sorted keys: the same state always gives the same bytes).
    private func canonical() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(self)
    }

    /// The bytes saved: the state with its checksum.
    func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(Envelope(state: self, sha256: SHA256.hash(data: Array(canonical())).hexString))
    }

    /// Reads saved bytes.
    static func decode(_ data: Data, for url: URL) -> Loaded {
        let decoder = JSONDecoder()
        if let envelope = try? decoder.decode(Envelope.self, from: data) {
            guard let canonical = try? envelope.state.canonical(),
                SHA256.hash(data: Array(canonical)).hexString == envelope.sha256
            else { return .unusable(reason: "its checksum does not match (it was changed, or torn by a crash)") }
            guard envelope.state.url.withoutCredentials == url.withoutCredentials else {
                return .unusable(reason: "it belongs to another URL")
            }
            return .valid(envelope.state)
        }
        guard var state = try? decoder.decode(PartialState.self, from: data) else {
            return .unusable(reason: "it cannot be read")
        }
        guard state.url.withoutCredentials == url.withoutCredentials else {
            return .unusable(reason: "it belongs to another URL")
        }
        // An earlier version's state has no checksum: its hash is checked against the file before any byte is used,
        // and a segment list (which nothing could check) is not used.
        state.file = nil
        if state.segments != nil {
            state.segments = nil
            state.hashedLength = 0
            state.hash = state.hash.map { StreamingHash($0.algorithm) }
        }
        return .valid(state)
    }
}
