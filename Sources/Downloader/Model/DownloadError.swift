import Foundation

/// Why a download failed: what happened, to which URL, and why, with the underlying error when there is one.
///
/// Compare with the static members to test the kind: `error == .checksumMismatch`. Equality compares the kind only;
/// `url`, `reason` and `statusCode` carry the details.
public struct DownloadError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: String, Sendable, Codable {
        case invalidURL, unsupportedScheme, httpStatus, invalidResponse, checksumMismatch, tooManyRedirects
        case connectionFailed, stalled, fileSystem, cancelled, fileChanged, corruptReceipts, suspended
        case directoryLocked, invalidChecksum, hostNotFound, tlsFailure, requestPreparationFailed
        case shutDown, conflictingOptions
    }

    private let code: Code
    /// The URL of the download, when the error belongs to one.
    public let url: URL?
    /// A sentence saying what went wrong.
    public let reason: String
    /// The HTTP status, for `.httpStatus`.
    public let statusCode: Int?
    /// The lower-level error (URLError, POSIX, …), when there was one.
    public let underlyingError: (any Error & Sendable)?
    /// The delay the server asked for in `Retry-After`, in seconds, when it sent one.
    public private(set) var retryAfter: TimeInterval?

    /// The kind as a stable name, for logs, JSON and APIs: the name of the static member it equals
    /// (`"checksumMismatch"` for `.checksumMismatch`). Names are never renamed; new kinds may be added.
    public var kind: String { code.rawValue }

    private init(
        _ code: Code, url: URL? = nil, reason: String = "", statusCode: Int? = nil,
        underlying: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.url = url
        self.reason = reason
        self.statusCode = statusCode
        self.underlyingError = underlying
    }

    /// The URL is malformed or cannot be made valid.
    public static let invalidURL = DownloadError(.invalidURL)
    /// The URL's scheme is not http or https.
    public static let unsupportedScheme = DownloadError(.unsupportedScheme)
    /// The server answered with a status that is not a success (see `statusCode`).
    public static let httpStatus = DownloadError(.httpStatus)
    /// The server's answer cannot be used: a `Content-Range` that disagrees with the request, more bytes than
    /// announced, a missing status, …
    public static let invalidResponse = DownloadError(.invalidResponse)
    /// The finished bytes do not have the expected checksum, even after one clean restart (a request whose checksum
    /// contradicts the one an unfinished download expects gets `conflictingOptions`).
    public static let checksumMismatch = DownloadError(.checksumMismatch)
    /// More than 10 redirects, or a redirect loop.
    public static let tooManyRedirects = DownloadError(.tooManyRedirects)
    /// The connection could not be made, or was lost or reset, or the body ended early.
    public static let connectionFailed = DownloadError(.connectionFailed)
    /// The host name could not be resolved: retrying does not help until the URL or the network's DNS changes.
    public static let hostNotFound = DownloadError(.hostNotFound)
    /// The TLS connection failed for a reason that retrying does not change: a certificate that is not trusted,
    /// expired or for another host (`reason` is libcurl's sentence and says how to trust a private CA).
    public static let tlsFailure = DownloadError(.tlsFailure)
    /// No byte arrived for longer than the stall timeout, or the transfer stayed below the lowest speed.
    public static let stalled = DownloadError(.stalled)
    /// Reading or writing local files failed (disk full, permissions, …).
    public static let fileSystem = DownloadError(.fileSystem)
    /// The download was removed, or the manager shut down, while the caller waited.
    public static let cancelled = DownloadError(.cancelled)
    /// A request's options contradict those of the unfinished download it would join: another expected checksum (the
    /// same algorithm, another digest), another destination or another file name (`reason` says which). Nothing
    /// changed: the download goes on as first asked; wait for it, or remove it and ask again.
    public static let conflictingOptions = DownloadError(.conflictingOptions)
    /// The request came after `DownloadManager.shutdown()` was called: the manager takes no work any more (make a new
    /// one for the directory). Nothing was started or saved for it.
    public static let shutDown = DownloadError(.shutDown)
    /// The download was suspended while the caller waited; `resume` or another request continues it.
    public static let suspended = DownloadError(.suspended)
    /// The resource changed while it was being downloaded, more often than the download could follow.
    public static let fileChanged = DownloadError(.fileChanged)
    /// Saved receipts could not be read (some or all); `reason` says what was dropped.
    public static let corruptReceipts = DownloadError(.corruptReceipts)
    /// Another manager (in this process or another) owns the state directory; `url` is that directory.
    public static let directoryLocked = DownloadError(.directoryLocked)
    /// An expected checksum given as text could not be read (see `reason`).
    public static let invalidChecksum = DownloadError(.invalidChecksum)
    /// `Configuration.prepareRequest` threw: the download fails at once, and `underlyingError` is what it threw (a
    /// `DownloadError` it throws is passed on as it is instead).
    public static let requestPreparationFailed = DownloadError(.requestPreparationFailed)

    /// Whether retrying later may succeed, so the manager retries it (up to `Configuration.retryLimit`).
    ///
    /// Transient: a connection refused, reset, lost or timed out, a body that ended early, a stall, HTTP 408, 429
    /// and 5xx. Permanent (the download fails at once): an unknown host (`.hostNotFound`), a TLS or certificate
    /// failure (`.tlsFailure`), any other 4xx, an unsupported scheme, a redirect loop, a checksum mismatch, a file
    /// system error.
    public var isTransient: Bool {
        switch code {
        case .connectionFailed, .stalled: return true
        case .httpStatus:
            guard let statusCode else { return false }
            return statusCode == 408 || statusCode == 429 || (500...599).contains(statusCode)
        default: return false
        }
    }

    /// The kind, the URL (credentials hidden) and the reason.
    public var description: String {
        var text = "DownloadError.\(code.rawValue)"
        if let url { text += " (\(url.isFileURL ? url.path : url.redactedAbsoluteString))" }
        if !reason.isEmpty { text += ": \(reason)" }
        return text
    }

    /// Equality compares the kind of error only, so that `error == .checksumMismatch` reads naturally.
    public static func == (lhs: DownloadError, rhs: DownloadError) -> Bool { lhs.code == rhs.code }

    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// Matches any error against a kind, so that `catch DownloadError.httpStatus { … }` and
    /// `switch error { case DownloadError.stalled: … }` work where `error` is `any Error`.
    /// - Parameters:
    ///   - pattern: the kind (`DownloadError.checksumMismatch`, …).
    ///   - value: the error thrown.
    /// - Returns: whether `value` is a `DownloadError` of that kind.
    public static func ~= (pattern: DownloadError, value: any Error) -> Bool {
        (value as? DownloadError)?.code == pattern.code
    }

    /// Matches a `DownloadError` against a kind (`case .httpStatus:` in a `switch` over a `DownloadError`).
    public static func ~= (pattern: DownloadError, value: DownloadError) -> Bool {
        value.code == pattern.code
    }

    /// The error with its URL's credentials removed, also from `reason` (which shows the URL redacted, its user
    /// name still there): the form saved to disk.
    var withoutCredentials: DownloadError {
        guard let url, url.hasCredentials else { return self }
        var copy = DownloadError(
            code, url: url.withoutCredentials,
            reason: reason.replacingOccurrences(
                of: url.redactedAbsoluteString, with: url.withoutCredentials.absoluteString),
            statusCode: statusCode, underlying: underlyingError)
        copy.retryAfter = retryAfter
        return copy
    }

    /// The error with a sentence added to its reason.
    func adding(_ hint: String) -> DownloadError {
        var copy = DownloadError(
            code, url: url, reason: reason + "; " + hint, statusCode: statusCode, underlying: underlyingError)
        copy.retryAfter = retryAfter
        return copy
    }

    // MARK: - Constructors with details

    static func invalidURL(_ text: String, reason: String) -> DownloadError {
        DownloadError(.invalidURL, url: nil, reason: "\"\(URL.redactingCredentials(text))\": \(reason)")
    }

    static func invalidURL(_ url: URL, reason: String) -> DownloadError {
        DownloadError(.invalidURL, url: url, reason: reason)
    }

    static func unsupportedScheme(_ url: URL) -> DownloadError {
        DownloadError(
            .unsupportedScheme, url: url, reason: "only http and https are supported, not \(url.scheme ?? "none")")
    }

    /// A redirect to a scheme other than http or https: not followed, nothing requested.
    static func unsupportedRedirect(_ url: URL, to location: String) -> DownloadError {
        DownloadError(
            .unsupportedScheme, url: url,
            reason: "the server redirected to \(URL.redactingCredentials(String(location.prefix(200)))): only http and "
                + "https redirects are followed, nothing was requested there")
    }

    static func httpStatus(_ status: Int, url: URL, retryAfter: TimeInterval? = nil) -> DownloadError {
        var error = DownloadError(
            .httpStatus, url: url, reason: "the server answered \(status)\(reasonPhrase(status))", statusCode: status)
        error.retryAfter = retryAfter
        return error
    }

    private static func reasonPhrase(_ status: Int) -> String {
        let phrases = [
            400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            408: "Request Timeout", 410: "Gone", 416: "Range Not Satisfiable", 429: "Too Many Requests",
            500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
            504: "Gateway Timeout",
        ]
        return phrases[status].map { " " + $0 } ?? ""
    }

    static func invalidResponse(_ url: URL, reason: String) -> DownloadError {
        DownloadError(.invalidResponse, url: url, reason: reason)
    }

    static func checksumMismatch(_ url: URL, expected: String, actual: String) -> DownloadError {
        DownloadError(.checksumMismatch, url: url, reason: "MD5 is \(actual), expected \(expected)")
    }

    static func checksumMismatch(_ url: URL, expected: Checksum, actual: Checksum) -> DownloadError {
        DownloadError(
            .checksumMismatch, url: url,
            reason: "\(actual.algorithm.rawValue.uppercased()) is \(actual.hexString), expected \(expected.hexString)")
    }

    /// A request expects a checksum that contradicts the one the unfinished download keeps (from an earlier
    /// request, perhaps before a restart).
    static func checksumConflict(_ url: URL, kept: Checksum, requested: Checksum) -> DownloadError {
        DownloadError(
            .conflictingOptions, url: url,
            reason:
                "this request expects \(requested), but the unfinished download expects \(kept) (asked earlier); "
                + "a file cannot have both: wait for it and compare, or remove the download and ask again")
    }

    /// A request's destination or file name contradicts the one of the unfinished download it would join.
    static func conflictingOptions(_ url: URL, reason: String) -> DownloadError {
        DownloadError(
            .conflictingOptions, url: url,
            reason: reason + "; the download goes on as first asked: wait for it, or remove it and ask again")
    }

    static func tooManyRedirects(_ url: URL, reason: String) -> DownloadError {
        DownloadError(.tooManyRedirects, url: url, reason: reason)
    }

    static func connectionFailed(_ url: URL, reason: String, underlying: (any Error & Sendable)? = nil) -> DownloadError
    {
        DownloadError(.connectionFailed, url: url, reason: reason, underlying: underlying)
    }

    static func hostNotFound(_ url: URL, reason: String, underlying: (any Error & Sendable)?) -> DownloadError {
        DownloadError(.hostNotFound, url: url, reason: reason, underlying: underlying)
    }

    static func tlsFailure(_ url: URL, reason: String, underlying: (any Error & Sendable)?) -> DownloadError {
        DownloadError(.tlsFailure, url: url, reason: reason, underlying: underlying)
    }

    static func stalled(_ url: URL, seconds: Double) -> DownloadError {
        DownloadError(.stalled, url: url, reason: "no data for \(secondsText(seconds)) s")
    }

    static func tooSlow(_ url: URL, bytesPerSecond: Double, seconds: Double) -> DownloadError {
        DownloadError(
            .stalled, url: url,
            reason: "slower than \(Int(bytesPerSecond)) bytes/s for \(secondsText(seconds)) s")
    }

    /// Seconds as a configuration gives them: whole ones as they are, others to a tenth (`-T 0.5` said "0 s").
    private static func secondsText(_ seconds: Double) -> String {
        let tenths = Int((seconds * 10).rounded())
        return tenths % 10 == 0 ? "\(tenths / 10)" : "\(tenths / 10).\(tenths % 10)"
    }

    static func fileSystem(_ url: URL?, reason: String, underlying: (any Error & Sendable)? = nil) -> DownloadError {
        DownloadError(.fileSystem, url: url, reason: reason, underlying: underlying)
    }

    static func cancelled(_ url: URL, reason: String = "cancelled") -> DownloadError {
        DownloadError(.cancelled, url: url, reason: reason)
    }

    static func shutDown(_ url: URL) -> DownloadError {
        DownloadError(
            .shutDown, url: url,
            reason: "the manager was shut down before this request: it takes no work any more (make a new one)")
    }

    static func suspended(_ url: URL) -> DownloadError {
        DownloadError(.suspended, url: url, reason: "suspended")
    }

    static func requestPreparationFailed(_ url: URL, underlying: any Error) -> DownloadError {
        DownloadError(
            .requestPreparationFailed, url: url, reason: "prepareRequest failed: \(underlying)",
            underlying: underlying)
    }

    static func fileChanged(_ url: URL, reason: String) -> DownloadError {
        DownloadError(.fileChanged, url: url, reason: reason)
    }

    static func invalidChecksum(_ text: String, reason: String) -> DownloadError {
        DownloadError(.invalidChecksum, url: nil, reason: "\"\(text.prefix(200))\": \(reason)")
    }

    static func directoryLocked(_ directory: URL, owner: Int32?) -> DownloadError {
        let who = owner.map { "another manager (process \($0))" } ?? "another manager"
        return DownloadError(.directoryLocked, url: directory, reason: "\(who) is using \(directory.path)")
    }

    static func corruptReceipts(_ file: URL, reason: String, underlying: (any Error & Sendable)? = nil) -> DownloadError
    {
        DownloadError(.corruptReceipts, url: file, reason: reason, underlying: underlying)
    }
}

extension DownloadError: Codable {
    private enum CodingKeys: String, CodingKey { case code, url, reason, statusCode, underlying, retryAfter }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            try container.decode(Code.self, forKey: .code),
            url: try container.decodeIfPresent(URL.self, forKey: .url),
            reason: try container.decodeIfPresent(String.self, forKey: .reason) ?? "",
            statusCode: try container.decodeIfPresent(Int.self, forKey: .statusCode),
            underlying: try container.decodeIfPresent(String.self, forKey: .underlying).map(SavedError.init))
        retryAfter = try container.decodeIfPresent(TimeInterval.self, forKey: .retryAfter)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(code, forKey: .code)
        try container.encodeIfPresent(url, forKey: .url)
        try container.encode(reason, forKey: .reason)
        try container.encodeIfPresent(statusCode, forKey: .statusCode)
        try container.encodeIfPresent(underlyingError.map { String(describing: $0) }, forKey: .underlying)
        try container.encodeIfPresent(retryAfter, forKey: .retryAfter)
    }
}

/// An underlying error restored from disk: only its description survives.
struct SavedError: Error, Sendable, CustomStringConvertible {
    let description: String
}

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
