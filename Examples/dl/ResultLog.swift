import Downloader
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `--result-log FILE`: one JSON line per URL as it ends, for pipelines — `url`, `path`, `size`, `digest`, `status`
/// (`ok` or `failed`), `error`, `time`. Each line reaches the file whole, in one `write(2)` on a descriptor opened
/// with `O_APPEND`, so a reader (`tail -f`, a script polling it) never sees half a line, and a rerun adds its lines
/// after the earlier run's. URLs are written without their credentials.
final class ResultLog: Sendable {
    private struct Line: Encodable {
        var url: String
        var path: String?
        var size: Int64?
        var digest: String?
        var status: String
        var error: String?
        var time: String
    }

    private let fd: Int32

    /// Opens (creating, mode 0644) the log for appending.
    /// - Throws: `UsageError` when it cannot be opened.
    init(path: String) throws(UsageError) {
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw UsageError(message: "--result-log: cannot open \(path): \(String(cString: strerror(errno)))")
        }
    }

    deinit { close(fd) }

    /// A verified file.
    func record(url: URL, receipt: DownloadReceipt) {
        write(
            Line(
                url: url.redactedAbsoluteString, path: receipt.fileURL.path, size: receipt.totalBytesWritten,
                digest: receipt.checksum?.description, status: "ok", time: Self.now()))
    }

    /// A URL that failed.
    func record(url: URL, error: DownloadError) {
        write(Line(url: url.redactedAbsoluteString, status: "failed", error: error.dlReason, time: Self.now()))
    }

    private func write(_ line: Line) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard var data = try? encoder.encode(line) else { return }
        data.append(UInt8(ascii: "\n"))
        // A line is small (well under PIPE_BUF for a pipe): one write(2), continued only after an interruption or a
        // short write (a full disk); a failure loses the line, not the run.
        _ = data.withUnsafeBytes { Console.write($0, to: fd) }
    }

    private static func now() -> String {
        Date().formatted(.iso8601)
    }
}
