import Foundation

/// What must survive a crash to resume a partial file: how far the hash got, and which version of the resource the
/// bytes belong to. Saved atomically beside the partial file at every window and whenever a transfer stops.
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
    /// For a file fetched in segments: the byte ranges written after the first `hashedLength` bytes (sorted,
    /// disjoint, not touching it); `nil` for a file written from its start only.
    var segments: [Range<Int64>]?

    init(
        url: URL, hashedLength: Int64, hash: StreamingHash?, validators: Validators, totalLength: Int64?,
        rangesSupported: Bool, suggestedFilename: String? = nil, announced: [Checksum] = [],
        restartedAfterMismatch: Bool = false, segments: [Range<Int64>]? = nil
    ) {
        self.url = url
        self.hashedLength = hashedLength
        self.hash = hash
        self.validators = validators
        self.totalLength = totalLength
        self.rangesSupported = rangesSupported
        self.suggestedFilename = suggestedFilename
        self.announced = announced
        self.restartedAfterMismatch = restartedAfterMismatch
        self.segments = segments
    }

    private enum CodingKeys: String, CodingKey {
        case url, hashedLength, hash, validators, totalLength, rangesSupported, suggestedFilename, announced
        case restartedAfterMismatch, segments
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
        segments = try container.decodeIfPresent([Range<Int64>].self, forKey: .segments)
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
        try container.encodeIfPresent(segments, forKey: .segments)
    }

    /// Reads a saved state; a missing, unreadable or foreign one is `nil` (the partial file is then not trusted).
    static func load(from file: URL, for url: URL) -> PartialState? {
        guard let data = try? Data(contentsOf: file),
            let state = try? JSONDecoder().decode(PartialState.self, from: data), state.url == url
        else { return nil }
        return state
    }

    /// Whether a saved state exists (readable or not) at `file`.
    static func exists(at file: URL) -> Bool {
        FileManager.default.fileExists(atPath: file.path)
    }

    /// Saves atomically (temporary file, then rename).
    /// - Throws: `DownloadError.fileSystem`.
    func save(to file: URL) throws(DownloadError) {
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            try AtomicFile.write(encoder.encode(self), to: file)
        } catch {
            throw .fileSystem(
                url, reason: "cannot save the transfer state \(file.lastPathComponent): \(error.localizedDescription)")
        }
    }
}
