import Foundation

extension DownloadError: LocalizedError {
    /// The URL (credentials hidden) and the reason, so that `error.localizedDescription` reads as a sentence:
    /// `"https://example.com/a.iso: the server answered 404 Not Found"`. An error made without details (the static
    /// kinds, for comparison) says what its kind means.
    public var errorDescription: String? {
        let what = reason.isEmpty ? Self.meaning(of: self) : reason
        guard let url else { return what }
        return "\(url.isFileURL ? url.path : url.redactedAbsoluteString): \(what)"
    }

    /// A sentence for an error that carries no reason of its own.
    private static func meaning(of error: DownloadError) -> String {
        switch error {
        case .invalidURL: return "the URL is malformed"
        case .unsupportedScheme: return "only http and https are supported"
        case .httpStatus: return error.statusCode.map { "the server answered \($0)" } ?? "the server refused"
        case .invalidResponse: return "the server's answer cannot be used"
        case .checksumMismatch: return "the file does not have the expected checksum"
        case .tooManyRedirects: return "too many redirects"
        case .connectionFailed: return "the connection failed"
        case .hostNotFound: return "the host name could not be resolved"
        case .tlsFailure: return "the TLS connection failed (certificate not trusted, expired or for another host)"
        case .stalled: return "the transfer stalled"
        case .fileSystem: return "a file could not be read or written"
        case .cancelled: return "the download was cancelled"
        case .suspended: return "the download was suspended"
        case .fileChanged: return "the file changed on the server while it was downloaded"
        case .corruptReceipts: return "the saved receipts could not be read"
        case .directoryLocked: return "another manager is using the directory"
        case .invalidChecksum: return "the expected checksum cannot be read"
        case .requestPreparationFailed: return "the request could not be prepared (prepareRequest threw)"
        default: return "the download failed"
        }
    }
}
