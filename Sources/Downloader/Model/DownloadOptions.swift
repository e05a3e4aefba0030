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
    /// Whether to compute the file's MD5 (default `true`). Turning it off saves CPU: the file is still assembled
    /// only from validated responses, but its content is not verified and the receipt has no `md5`. An
    /// `expectedMD5` always turns it on.
    public var computesMD5: Bool

    /// Creates options with the defaults: no extra headers, no expected digest, `.md5OfURL` naming, MD5 computed.
    public init() {
        headers = [:]
        expectedMD5 = nil
        naming = .md5OfURL
        computesMD5 = true
    }

    /// Creates options.
    /// - Parameters:
    ///   - headers: extra request headers.
    ///   - expectedMD5: the expected MD5 as hex, if known.
    ///   - naming: how the completed file is named.
    ///   - computesMD5: whether to hash the file (see `computesMD5`).
    public init(
        headers: [String: String] = [:], expectedMD5: String? = nil, naming: FileNaming = .md5OfURL,
        computesMD5: Bool = true
    ) {
        self.headers = headers
        self.expectedMD5 = expectedMD5
        self.naming = naming
        self.computesMD5 = computesMD5
    }

    private enum CodingKeys: String, CodingKey { case headers, expectedMD5, naming, computesMD5 }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        headers = try container.decodeIfPresent([String: String].self, forKey: .headers) ?? [:]
        expectedMD5 = try container.decodeIfPresent(String.self, forKey: .expectedMD5)
        naming = try container.decodeIfPresent(FileNaming.self, forKey: .naming) ?? .md5OfURL
        computesMD5 = try container.decodeIfPresent(Bool.self, forKey: .computesMD5) ?? true
    }
}
