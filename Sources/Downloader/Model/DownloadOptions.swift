/// How the completed file is named.
public enum FileNaming: Sendable, Hashable, Codable {
    /// `md5(url)` plus the URL's extension: stable, unique per URL, never colliding.
    case md5OfURL
    /// The server's `Content-Disposition` name, else the URL's last path component, else `md5(url)`; sanitised, and
    /// made unique (`name (1).ext`) instead of overwriting an unrelated file.
    case suggested
    /// This name, sanitised, made unique like `.suggested`.
    case custom(String)
}

/// Per-download choices. Every property has a default, so `DownloadOptions()` works.
public struct DownloadOptions: Sendable, Hashable, Codable {
    /// Extra request headers (for example `Authorization`), sent on every request of the download. `Authorization`
    /// is dropped when a redirect leads to another host.
    public var headers: [String: String]
    /// The expected MD5 as 32 hex digits. It wins over any digest the server announces.
    public var expectedMD5: String?
    /// How the completed file is named.
    public var naming: FileNaming

    /// Creates options with the defaults: no extra headers, no expected digest, `.md5OfURL` naming.
    public init() {
        headers = [:]
        expectedMD5 = nil
        naming = .md5OfURL
    }

    /// Creates options.
    /// - Parameters:
    ///   - headers: extra request headers.
    ///   - expectedMD5: the expected MD5 as hex, if known.
    ///   - naming: how the completed file is named.
    public init(headers: [String: String] = [:], expectedMD5: String? = nil, naming: FileNaming = .md5OfURL) {
        self.headers = headers
        self.expectedMD5 = expectedMD5
        self.naming = naming
    }
}
