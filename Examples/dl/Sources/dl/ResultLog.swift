import Downloader
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `--result-log FILE`: one JSON line per URL, for pipelines — `url`, `path`, `size`, `digest`, `status` (`ok` or
/// `failed`), `error`, `time` — its latest outcome, however many runs wrote the file.
///
/// Each line reaches the file whole, in one `write(2)` on a descriptor opened with `O_APPEND`, so a reader (`tail -f`,
/// a script polling it) never sees half a line — except after a `kill -9` that cut a write short between two pages of
/// the file; the next run drops that piece before it writes. A rerun (after `kill -9`, or of the same list later)
/// reads what the file holds first: a URL already logged `ok` gets no new line (its file was delivered), and a URL
/// whose outcome changed gets its new line, the older one leaving the file when the run ends (`finish()` rewrites it
/// atomically, keeping the last line of each URL in order). URLs are written without their credentials. It keeps 8
/// bytes per URL logged (a hash of its text), so a list of millions costs tens of MB.
final class ResultLog: @unchecked Sendable {
    private struct Line: Encodable {
        var url: String
        var path: String?
        var size: Int64?
        var digest: String?
        var status: String
        var error: String?
        var time: String
    }

    private let path: String
    private let fd: Int32
    private let lock = NSLock()
    /// The URLs the file has a line for: whether their last one says `ok`.
    private var logged: [UInt64: Bool] = [:]
    /// Whether the file holds more than one line for a URL (a changed outcome, or an earlier version's reruns).
    private var superseded = false

    /// Opens (creating, mode 0644) the log for appending, after reading which URLs it has lines for.
    /// - Throws: `UsageError` when it cannot be opened.
    init(path: String) throws(UsageError) {
        self.path = path
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw UsageError(message: "--result-log: cannot open \(path): \(String(cString: strerror(errno)))")
        }
        let data = FileManager.default.contents(atPath: path) ?? Data()
        // Every line is written with its newline in one write(2), but a SIGKILL can end that write between two pages
        // of the file: a file that does not end in a newline ends in such a piece. It is dropped (its URL is then not
        // logged, and gets its line again), or this run's first line would be appended to it: one line that parses as
        // nothing, and a URL with two lines.
        let whole = data.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? data.startIndex
        if whole < data.endIndex {
            _ = ftruncate(fd, off_t(whole - data.startIndex))
        }
        for line in data[..<whole].split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            guard let (key, ok) = Self.parse(line) else { continue }
            if logged.updateValue(ok, forKey: key) != nil { superseded = true }
        }
    }

    deinit { close(fd) }

    /// A verified file: logged unless its last line says `ok` already.
    func record(url: URL, receipt: DownloadReceipt) {
        write(
            Line(
                url: url.redactedAbsoluteString, path: receipt.fileURL.path, size: receipt.totalBytesWritten,
                digest: receipt.checksum?.description, status: "ok", time: Self.now()), ok: true)
    }

    /// A URL that failed: its new outcome.
    func record(url: URL, error: DownloadError) {
        write(
            Line(url: url.redactedAbsoluteString, status: "failed", error: error.dlReason, time: Self.now()), ok: false)
    }

    /// Leaves one line per URL in the file, its last, when an earlier one was superseded (at the end of a run).
    func finish() {
        lock.lock()
        defer { lock.unlock() }
        guard superseded else { return }
        guard let data = FileManager.default.contents(atPath: path) else { return }
        let lines = data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true)
        var last: [UInt64: Int] = [:]
        for (index, line) in lines.enumerated() {
            if let (key, _) = Self.parse(line) { last[key] = index }
        }
        var kept = Data()
        for (index, line) in lines.enumerated() {
            // A line that cannot be read is kept as it is: it is not this log's to judge.
            if let (key, _) = Self.parse(line), last[key] != index { continue }
            kept.append(contentsOf: line)
            kept.append(UInt8(ascii: "\n"))
        }
        let temporary = path + ".dl-\(UUID().uuidString)"
        guard FileManager.default.createFile(atPath: temporary, contents: kept, attributes: [.posixPermissions: 0o644])
        else { return }
        if rename(temporary, path) != 0 { unlink(temporary) } else { superseded = false }
    }

    private func write(_ line: Line, ok: Bool) {
        let key = Self.key(line.url)
        lock.lock()
        defer { lock.unlock() }
        let before = logged[key]
        if ok && before == true { return }  // delivered, and said so already
        if before != nil { superseded = true }
        logged[key] = ok
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard var data = try? encoder.encode(line) else { return }
        data.append(UInt8(ascii: "\n"))
        // A line is small (well under PIPE_BUF for a pipe): one write(2), continued only after an interruption or a
        // short write (a full disk); a failure loses the line, not the run.
        _ = data.withUnsafeBytes { Console.write($0, to: fd) }
    }

    /// A line's URL key and whether it says `ok`; `nil` for a line that is not this log's.
    private static func parse(_ line: Data.SubSequence) -> (UInt64, Bool)? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any],
            let url = object["url"] as? String
        else { return nil }
        return (key(url), object["status"] as? String == "ok")
    }

    /// 8 bytes of the MD5 of a URL's text.
    private static func key(_ url: String) -> UInt64 {
        Hashing.MD5.hash(data: Array(url.utf8)).bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    private static func now() -> String {
        Date().formatted(.iso8601)
    }
}
