import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Turns an error from URLSession into a sentence for `DownloadError.reason`, e.g.
/// "the network connection was lost (URLError -1005)", instead of an `NSError` dump.
enum TransportError {
    /// The download error for a request that URLSession ended with `error`.
    /// - Parameters:
    ///   - error: URLSession's error.
    ///   - url: the download's URL.
    /// - Returns: `.connectionFailed` with a readable reason and the original error kept.
    static func failure(_ error: any Error, url: URL) -> DownloadError {
        .connectionFailed(url, reason: describe(error), underlying: SavedError(description: "\(error)"))
    }

    static func describe(_ error: any Error) -> String {
        let error = error as NSError
        var parts: [String] = []
        for candidate in [error, error.userInfo[NSUnderlyingErrorKey] as? NSError].compactMap({ $0 }) {
            if let text = candidate.userInfo[NSLocalizedDescriptionKey] as? String, !text.isEmpty, text != "(null)",
                !parts.contains(text)
            {
                parts.append(text)
            }
        }
        if parts.isEmpty, let known = knownCodes[error.code], error.domain == NSURLErrorDomain { parts.append(known) }
        if parts.isEmpty { parts.append("the transfer failed") }
        let domain = error.domain == NSURLErrorDomain ? "URLError" : error.domain
        return "\(parts.joined(separator: ": ")) (\(domain) \(error.code))"
    }

    private static let knownCodes: [Int: String] = [
        -1: "an unknown transfer error (for example a malformed response header)",
        -1001: "the request timed out", -1003: "the host was not found", -1004: "could not connect to the server",
        -1005: "the network connection was lost", -1011: "the server's response was unusable",
    ]
}
