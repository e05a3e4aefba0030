import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Whole-file writes that a crash can never leave half-done: the bytes go to a temporary file beside the target,
/// which is then renamed over it. A `kill -9` between the two leaves only a temporary file, which
/// `removeOrphans(in:)` clears at the next start.
enum AtomicFile {
    /// The marker in temporary file names (Foundation's own atomic writes use `.dat.nosync`).
    static let temporaryMarker = ".tmp-"

    /// Writes `data` to `file` atomically.
    /// - Throws: the underlying file-system error.
    static func write(_ data: Data, to file: URL) throws {
        let temporary = file.deletingLastPathComponent()
            .appendingPathComponent(".\(file.lastPathComponent)\(temporaryMarker)\(UUID().uuidString)")
        do {
            try data.write(to: temporary)
            // rename(2) replaces the target atomically, whether or not it exists.
            guard rename(temporary.path, file.path) == 0 else {
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw error
        }
    }

    /// Deletes temporary files that a crash left in `directory` (ours, and Foundation's `.dat.nosync…`).
    static func removeOrphans(in directory: URL) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return }
        for name in names where name.hasPrefix(".") && (name.contains(temporaryMarker) || name.hasPrefix(".dat.nosync"))
        {
            try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))
        }
    }
}
