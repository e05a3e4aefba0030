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
    /// How the completed file is named (default `.md5OfURL`). Asking for a completed download with another naming
    /// set explicitly renames its file; options that leave the naming at its default never move a file.
    public var naming: FileNaming {
        get { chosenNaming ?? .md5OfURL }
        set { chosenNaming = newValue }
    }
    /// The naming, when a caller chose one.
    var chosenNaming: FileNaming?
    /// Whether to compute the file's MD5 (default `true`). Turning it off saves CPU: the file is still assembled
    /// only from validated responses, but its content is not verified and the receipt has no `md5`. An
    /// `expectedMD5` always turns it on.
    public var computesMD5: Bool

    /// Creates options with the defaults: no extra headers, no expected digest, `.md5OfURL` naming (not chosen), MD5
    /// computed.
    public init() {
        headers = [:]
        expectedMD5 = nil
        chosenNaming = nil
        computesMD5 = true
    }

    /// Creates options.
    /// - Parameters:
    ///   - headers: extra request headers.
    ///   - expectedMD5: the expected MD5 as hex, if known.
    ///   - naming: how the completed file is named; `nil` leaves the default (`.md5OfURL`) unchosen.
    ///   - computesMD5: whether to hash the file (see `computesMD5`).
    public init(
        headers: [String: String] = [:], expectedMD5: String? = nil, naming: FileNaming? = nil,
        computesMD5: Bool = true
    ) {
        self.headers = headers
        self.expectedMD5 = expectedMD5
        self.chosenNaming = naming
        self.computesMD5 = computesMD5
    }

    private enum CodingKeys: String, CodingKey { case headers, expectedMD5, naming, computesMD5 }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        headers = try container.decodeIfPresent([String: String].self, forKey: .headers) ?? [:]
        expectedMD5 = try container.decodeIfPresent(String.self, forKey: .expectedMD5)
        chosenNaming = try container.decodeIfPresent(FileNaming.self, forKey: .naming)
        computesMD5 = try container.decodeIfPresent(Bool.self, forKey: .computesMD5) ?? true
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(headers, forKey: .headers)
        try container.encodeIfPresent(expectedMD5, forKey: .expectedMD5)
        try container.encodeIfPresent(chosenNaming, forKey: .naming)
        try container.encode(computesMD5, forKey: .computesMD5)
    }
}
