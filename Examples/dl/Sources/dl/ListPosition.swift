import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How far `dl -i FILE` read its list, saved in the state folder (`.dl/list-position`) so that the same command after
/// a `kill -9` or a signal starts reading where the last run stopped, and reads the list's beginning after its end.
///
/// Every entry is still read once per run — the part from the position to the end first, then the part before it —
/// so the position is only an order, never a reason to skip a URL: a rerun of a list of a million URLs killed half-way
/// asks for the files it lacks at once, instead of first reading past the half a million it has (about 47 µs each).
/// It is kept only for the same file unchanged (device, inode, size and modification time), at the start of a line;
/// anything else, or no saved position, reads the list from its first line. A pipe (`-i -`) has none.
struct ListPosition: Equatable {
    /// The list file it belongs to: device, inode, size, modification time (seconds, nanoseconds).
    var identity: [Int64]
    /// Where an entry's URL line starts.
    var offset: Int64
    /// How many lines come before it (for the line numbers of messages).
    var line: Int

    /// The file's name inside the state folder.
    static let name = "list-position"

    /// The identity of an open file, `nil` when it is not a regular file.
    static func identity(of fd: Int32) -> [Int64]? {
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        #if canImport(Darwin)
            let modified = info.st_mtimespec
        #else
            let modified = info.st_mtim
        #endif
        return [
            Int64(info.st_dev), Int64(info.st_ino), Int64(info.st_size), Int64(modified.tv_sec),
            Int64(modified.tv_nsec),
        ]
    }

    /// The position saved for the list open as `fd`, if it is still that file's and at the start of a line.
    /// - Parameters:
    ///   - folder: the state folder.
    ///   - fd: the list, open for reading.
    static func saved(in folder: URL, for fd: Int32) -> ListPosition? {
        guard let identity = identity(of: fd),
            let data = FileManager.default.contents(atPath: folder.appendingPathComponent(name).path),
            let text = String(data: data, encoding: .utf8)
        else { return nil }
        let fields = text.split(separator: " ").compactMap { Int64($0.trimmingCharacters(in: .newlines)) }
        guard fields.count == 8, fields[0] == 1, Array(fields[1...5]) == identity, fields[6] > 0,
            fields[6] <= identity[2], fields[7] >= 0
        else { return nil }
        var before: UInt8 = 0  // the byte before a line's start is a newline
        guard pread(fd, &before, 1, off_t(fields[6] - 1)) == 1, before == UInt8(ascii: "\n") else { return nil }
        return ListPosition(identity: identity, offset: fields[6], line: Int(fields[7]))
    }

    /// Saves the position (a new file renamed over the old one; a failure only loses the order of the next run).
    /// - Parameter folder: the state folder.
    func save(in folder: URL) {
        let text = "1 " + (identity + [offset, Int64(line)]).map(String.init).joined(separator: " ") + "\n"
        let temporary = folder.appendingPathComponent(Self.name + ".new").path
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        if written == bytes.count {
            rename(temporary, folder.appendingPathComponent(Self.name).path)
        } else {
            unlink(temporary)
        }
    }

    /// Removes the saved position of `folder`, if any (and a new one a kill left half-written).
    static func forget(in folder: URL) {
        unlink(folder.appendingPathComponent(name).path)
        unlink(folder.appendingPathComponent(name + ".new").path)
    }
}
