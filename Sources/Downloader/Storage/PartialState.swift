import Foundation

/// What must survive a crash to resume a partial file: how far the hash got, and which version of the resource the
/// bytes belong to. Saved atomically beside the partial file at every window and whenever a transfer stops.
struct PartialState: Codable, Sendable, Equatable {
    /// The download's URL (a check that the state belongs to this file).
    var url: URL
    /// How many bytes `md5` has hashed; the partial file holds at least these bytes unless it was damaged.
    var hashedLength: Int64
    /// The hash of the first `hashedLength` bytes.
    var md5: MD5
    /// The validators of the version being downloaded.
    var validators: Validators
    /// The resource's length, if known.
    var totalLength: Int64?
    /// Whether the server honoured Range for this version.
    var rangesSupported: Bool
    /// The server's raw `Content-Disposition` file name, if any.
    var suggestedFilename: String?
    /// The MD5 the server announced, as hex.
    var announcedMD5: String?
    /// Whether the file was already restarted once after a checksum mismatch.
    var restartedAfterMismatch: Bool = false

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
