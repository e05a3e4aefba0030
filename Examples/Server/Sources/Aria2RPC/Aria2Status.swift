import Downloader
import Foundation

/// aria2's status struct (`aria2.tellStatus`) of a download: its field names, every number as a string.
extension Aria2Session {
    /// aria2's name of a state: `active`, `waiting`, `paused`, `error`, `complete` (and `removed`, which only
    /// `aria2.remove` leaves).
    static func status(of state: DownloadState) -> String {
        switch state {
        case .downloading: "active"
        case .queued: "waiting"
        case .suspended, .idle: "paused"  // neither starts without a request
        case .failed: "error"
        case .completed: "complete"
        }
    }

    /// aria2's exit code (its manual's EXIT STATUS) for why a download failed.
    static func errorCode(of error: DownloadError) -> String {
        switch error.kind {
        case "httpStatus":
            switch error.statusCode {
            case 404: "3"
            case 401, 407: "24"
            default: "22"
            }
        case "checksumMismatch": "32"
        case "stalled": "2"
        case "connectionFailed": "6"
        case "hostNotFound": "19"
        case "fileSystem": "16"
        default: "1"
        }
    }

    /// Where a download's file is or will be, for `files[].path`.
    func path(of receipt: DownloadReceipt) -> String {
        if receipt.state == .completed { return receipt.fileURL.path }
        if let destination = destinations[receipt.url] { return destination.path }
        let name = receipt.url.lastPathComponent
        return directory.appendingPathComponent(name.isEmpty || name == "/" ? "index.html" : name).path
    }

    /// The status struct of a download, with only `keys` when given.
    func status(of receipt: DownloadReceipt, keys: Set<String>? = nil) -> JSONValue {
        let total = receipt.totalBytesExpectedToWrite ?? (receipt.state == .completed ? receipt.totalBytesWritten : 0)
        let pieceLength: Int64 = 1 << 20
        let file: JSONValue = [
            "index": "1",
            "path": .string(path(of: receipt)),
            "length": .string(String(total)),
            "completedLength": .string(String(receipt.totalBytesWritten)),
            "selected": "true",
            "uris": [["uri": .string(receipt.url.absoluteString), "status": "used"]],
        ]
        var fields: [String: JSONValue] = [
            "gid": .string(Self.gid(of: receipt)),
            "status": .string(Self.status(of: receipt.state)),
            "totalLength": .string(String(total)),
            "completedLength": .string(String(receipt.totalBytesWritten)),
            "uploadLength": "0",
            "downloadSpeed": .string(String(Int(receipt.bytesPerSecond ?? 0))),
            "uploadSpeed": "0",
            "connections": .string(String(receipt.state == .downloading ? receipt.activeConnections : 0)),
            "pieceLength": .string(String(pieceLength)),
            "numPieces": .string(String(max(1, (total + pieceLength - 1) / pieceLength))),
            "dir": .string((path(of: receipt) as NSString).deletingLastPathComponent),
            "files": [file],
        ]
        switch receipt.state {
        case .completed:
            fields["errorCode"] = "0"
        case .failed:
            fields["errorCode"] = .string(receipt.error.map(Self.errorCode) ?? "1")
            fields["errorMessage"] = .string(receipt.error?.errorDescription ?? "failed")
        default:
            break
        }
        if let keys { fields = fields.filter { keys.contains($0.key) } }
        return .object(fields)
    }
}
