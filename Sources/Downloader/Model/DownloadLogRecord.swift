import Foundation

/// One thing a manager decided or noticed, for a logger: a level, a sentence and metadata
/// (`DownloadManager.Configuration.log`). A swift-log user maps it in a few lines: the level's name is swift-log's,
/// and the metadata are strings.
public struct DownloadLogRecord: Sendable, Hashable {
    /// How much it matters; the names are swift-log's levels.
    public enum Level: String, Sendable, Hashable, Codable, CaseIterable {
        case debug, info, notice, warning, error
    }

    /// How much it matters.
    public var level: Level
    /// What happened, in a sentence (credentials hidden).
    public var message: String
    /// Details as strings: `url` (credentials hidden), `id` (`DownloadReceipt.identifier`), and where they apply
    /// `state`, `bytes`, `expected`, `attempt`, `delay`, `error` (`DownloadError.kind`), `status`.
    public var metadata: [String: String]

    /// Creates a record.
    public init(level: Level, message: String, metadata: [String: String] = [:]) {
        self.level = level
        self.message = message
        self.metadata = metadata
    }
}

extension DownloadLogRecord {
    /// The record of an event, or `nil` for what is too frequent to log (progress, each save).
    init?(_ event: DownloadEvent) {
        var metadata = ["url": event.url.redactedAbsoluteString]
        if case .receiptsSaveFailed = event {} else { metadata = Self.metadata(about: event.url) }
        switch event {
        case .progress, .receiptsSaved:
            return nil
        case .stateChanged(let receipt):
            metadata["state"] = receipt.state.rawValue
            metadata["bytes"] = String(receipt.totalBytesWritten)
            if let expected = receipt.totalBytesExpectedToWrite { metadata["expected"] = String(expected) }
            switch receipt.state {
            case .completed:
                let checked = receipt.verification.map { " (\($0))" } ?? ""
                self.init(level: .notice, message: "completed\(checked)", metadata: metadata)
            case .failed:
                if let error = receipt.error { Self.describe(error, in: &metadata) }
                self.init(
                    level: .error, message: "failed: " + (receipt.error?.errorDescription ?? "unknown"),
                    metadata: metadata)
            default:
                self.init(level: .info, message: receipt.state.rawValue, metadata: metadata)
            }
        case .retrying(_, let attempt, let delay, let reason):
            metadata["attempt"] = String(attempt)
            metadata["delay"] = String(format: "%.1f", delay)
            Self.describe(reason, in: &metadata)
            self.init(
                level: .warning,
                message: "retrying in \(String(format: "%.1f", delay)) s (retry \(attempt)): \(reason.reason)",
                metadata: metadata)
        case .warning(_, let reason):
            self.init(level: .warning, message: reason, metadata: metadata)
        case .removed:
            self.init(level: .info, message: "removed", metadata: metadata)
        case .receiptsSaveFailed(let error):
            Self.describe(error, in: &metadata)
            self.init(
                level: .error, message: "the receipts could not be saved: \(error.reason)", metadata: metadata)
        }
    }

    /// A warning about a download that names the error's kind (`error`, `status`): a request refused, never dropped
    /// silently.
    static func warning(_ error: DownloadError, about url: URL) -> DownloadLogRecord {
        var metadata = metadata(about: url)
        describe(error, in: &metadata)
        return DownloadLogRecord(level: .warning, message: error.reason, metadata: metadata)
    }

    /// The metadata every record about one download carries: its URL (credentials hidden) and its identifier.
    static func metadata(about url: URL) -> [String: String] {
        ["url": url.redactedAbsoluteString, "id": url.downloadIdentifier]
    }

    private static func describe(_ error: DownloadError, in metadata: inout [String: String]) {
        metadata["error"] = error.kind
        if let status = error.statusCode { metadata["status"] = String(status) }
    }
}
