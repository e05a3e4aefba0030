import Foundation

/// One download as an API or a user interface shows it: a `Codable` value with no absolute path and no credential.
///
/// Made by `DownloadManager.snapshot(for:)`, `snapshot(identifiedBy:)` and `snapshots(after:limit:)`; its JSON keys
/// are its property names, numbers are numbers and dates do not occur, so a web front-end reads it as it is.
public struct DownloadSnapshot: Sendable, Codable, Hashable, Identifiable {
    /// One failure, as a client shows it.
    public struct Failure: Sendable, Codable, Hashable {
        /// `DownloadError.kind`: a stable name such as `"httpStatus"` or `"checksumMismatch"`.
        public var kind: String
        /// The sentence that says what went wrong and to which URL (`localizedDescription`, credentials hidden).
        public var message: String
        /// The HTTP status, for `"httpStatus"`.
        public var statusCode: Int?
    }

    /// `DownloadReceipt.identifier`: stable, safe in a URL path.
    public var id: String
    /// The URL without its user or password.
    public var url: URL
    /// Where the download is in its life.
    public var state: DownloadState
    /// Bytes on disk.
    public var bytesWritten: Int64
    /// The file's size, `nil` while unknown.
    public var bytesExpected: Int64?
    /// From 0 to 1 (see `DownloadReceipt.fractionCompleted`).
    public var fractionCompleted: Double
    /// Bytes per second of this session, `nil` when not downloading.
    public var bytesPerSecond: Double?
    /// Seconds left at the current speed, `nil` when unknown.
    public var estimatedTimeRemaining: TimeInterval?
    /// Its requests in flight, its connections (`DownloadReceipt.activeConnections`); `nil` when not downloading.
    public var activeConnections: Int?
    /// The completed file's path relative to the manager's completed area (`"report.pdf"`, or `"2026/report.pdf"`
    /// for a destination below it); `nil` until completed, and for a file placed outside that area.
    public var path: String?
    /// The completed file's checksum as `algorithm=hex` (`"sha-256=…"`, as `dl --checksum` takes it), when it was
    /// hashed.
    public var checksum: String?
    /// The checksum the download was asked to have, as `algorithm=hex` (`DownloadReceipt.expectedChecksum`).
    public var expectedChecksum: String?
    /// Why it failed, when it failed.
    public var failure: Failure?
    /// Suspended because its process stopped, not by a caller (`DownloadReceipt.isInterrupted`).
    public var isInterrupted: Bool

    /// Takes what a client may see of a receipt.
    /// - Parameters:
    ///   - receipt: the download.
    ///   - completedDirectory: the manager's completed area, which `path` is relative to.
    public init(_ receipt: DownloadReceipt, completedDirectory: URL) {
        id = receipt.identifier
        url = receipt.url.withoutCredentials
        state = receipt.state
        bytesWritten = receipt.totalBytesWritten
        bytesExpected = receipt.totalBytesExpectedToWrite
        fractionCompleted = receipt.fractionCompleted
        bytesPerSecond = receipt.bytesPerSecond
        estimatedTimeRemaining = receipt.estimatedTimeRemaining
        activeConnections = receipt.state == .downloading ? receipt.activeConnections : nil
        if receipt.state == .completed {
            let base = completedDirectory.standardizedFileURL.path
            let file = receipt.fileURL.standardizedFileURL.path
            let prefix = base.hasSuffix("/") ? base : base + "/"
            path = file.hasPrefix(prefix) ? String(file.dropFirst(prefix.count)) : nil
        }
        checksum = receipt.checksum?.description
        expectedChecksum = receipt.expectedChecksum?.description
        isInterrupted = receipt.isInterrupted
        failure = receipt.error.map {
            Failure(kind: $0.kind, message: $0.errorDescription ?? $0.reason, statusCode: $0.statusCode)
        }
    }
}
