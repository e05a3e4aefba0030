import Foundation

/// One download asked of a batch (`DownloadManager.download(_:maximumInFlight:)`): what to fetch and how.
public struct DownloadRequest: Sendable, Hashable {
    /// What to download; its identity.
    public var url: URL
    /// Headers, expected checksum, naming, destination, … as for `DownloadManager.download(_:options:)`.
    public var options: DownloadOptions

    /// Creates a request.
    /// - Parameters:
    ///   - url: what to download.
    ///   - options: how; the defaults when omitted.
    public init(_ url: URL, options: DownloadOptions = DownloadOptions()) {
        self.url = url
        self.options = options
    }
}

/// How one request of a batch ended: its verified file, or why not.
public struct DownloadOutcome: Sendable {
    /// The request, as it was given.
    public let request: DownloadRequest
    /// The completed receipt (`fileURL` is the verified file), or the error that ended the download.
    public let result: Result<DownloadReceipt, DownloadError>

    /// Creates an outcome.
    public init(request: DownloadRequest, result: Result<DownloadReceipt, DownloadError>) {
        self.request = request
        self.result = result
    }
}
