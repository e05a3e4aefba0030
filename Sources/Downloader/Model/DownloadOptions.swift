import Foundation

/// How the completed file is named.
public enum FileNaming: Sendable, Hashable, Codable {
    /// `md5(url)` plus the URL's extension: stable, unique per URL, never colliding; replaced by a newer verified
    /// version of the same URL (the default before 1.0.0).
    case md5OfURL
    /// The server's `Content-Disposition` name, else the URL's last path component, else `md5(url)`; sanitised, and
    /// made unique (`name (1).ext`) instead of overwriting an unrelated file. The default.
    case suggested
    /// This name, sanitised, made unique like `.suggested`.
    case custom(String)
}

extension FileNaming {
    /// How the naming reads in a sentence.
    var phrase: String {
        switch self {
        case .md5OfURL: return "after the MD5 of its URL"
        case .suggested: return "as the server suggests"
        case .custom(let name): return "\"\(name)\""
        }
    }
}

/// Per-download choices. Every property has a default, so `DownloadOptions()` works.
public struct DownloadOptions: Sendable, Hashable, Codable {
    /// Extra request headers (for example `Authorization`), sent on every request of the download. `Authorization`
    /// is dropped when a redirect leads to another host.
    public var headers: [String: String]
    /// The checksum the file must have (MD5, SHA-1 or SHA-256: `Checksum(parsing: "sha-256=…")`). It is the
    /// algorithm the file is hashed with (no second pass), and it wins over any digest the server announces.
    public var checksum: Checksum?
    /// Shorthand for an expected MD5 as 32 hex digits; `checksum` wins when both are set.
    public var expectedMD5: String?
    /// How the completed file is named (default `.suggested`: the server's name, else the URL's). Asking for a
    /// completed download with another naming set explicitly renames its file; options that leave the naming at its
    /// default never move a file.
    public var naming: FileNaming {
        get { chosenNaming ?? .suggested }
        set { chosenNaming = newValue }
    }
    /// The naming, when a caller chose one.
    var chosenNaming: FileNaming?
    /// Whether to hash the file when no checksum is expected (default `true`): with the algorithm of a digest the
    /// server announces (SHA-256 before SHA-1 before MD5), else MD5. `false` turns off every algorithm: it saves CPU,
    /// and the file is still assembled only from validated responses, but its content is not verified
    /// (`Verification.lengthOnly`). An expected checksum always hashes.
    public var computesChecksum: Bool
    /// The name `computesChecksum` had while MD5 was the only digest: it turns off every algorithm, not only MD5.
    @available(*, deprecated, renamed: "computesChecksum")
    public var computesMD5: Bool {
        get { computesChecksum }
        set { computesChecksum = newValue }
    }
    /// Which waiting download starts first: higher first, ties in the manager's FIFO or LIFO order (default 0). It
    /// orders only downloads that wait for a slot; a running one is never stopped for a higher priority. A request
    /// with a higher priority than the download's raises it; a lower one leaves it.
    public var priority: Int
    /// The exact file the verified download is written to (a file URL), instead of a name in the completed area.
    /// Its folders are created; a file already there is replaced only by a verified one, atomically. `naming` is
    /// then unused. A manager keeps one download per URL: asking for a completed URL with another destination copies
    /// its verified file there (the file at the earlier destination stays yours; a file in the completed area moves)
    /// and the receipt follows the new one; a request whose destination differs from the one of a download that waits
    /// or runs is refused (`DownloadError.conflictingOptions`). Default `nil`.
    public var destination: URL?
    /// The most bytes per second this download receives, on average (the manager's
    /// `Configuration.maximumBytesPerSecond` applies as well). URLSession cannot slow a response, so the limit is
    /// kept by asking for small Range windows (a quarter of a second at the limit) no faster than the limit allows;
    /// a server that ignores Range sends the file at its own speed. Default `nil`: no limit.
    public var maximumBytesPerSecond: Int?
    /// How many connections fetch this file at once (1...16), each a segment of it: a server that caps each
    /// connection's speed then serves about that many times more. Used only when the server answers Range with 206
    /// and a validator to send as `If-Range` (a strong ETag or a Last-Modified date) and at least two segments of
    /// 4 MiB are left; otherwise, and after any sign of a changed resource, one connection. Resume and verification
    /// work as with one. Default `nil`: the manager's `Configuration.connectionsPerDownload` (1 unless set).
    public var connections: Int?
    /// Other URLs of the same file (aria2's several URIs for one download). The first URL stays the download's
    /// identity; when a request to it fails — any error, permanent ones included — the transfer goes on from the next
    /// mirror, by Range from where it stopped; with `connections` above 1, the segments are spread over the URL and
    /// the mirrors at once. A mirror's bytes join the file only when it proves the same version (the same length
    /// and validators, asked with `If-Range`), or, with an expected `checksum`, after the bytes before the resume
    /// point compare equal (the checksum then checks the whole file). `Authorization`, `Proxy-Authorization` and
    /// `Cookie` from `headers` go only to the URL's own origin (use `Configuration.prepareRequest` for a mirror's
    /// credentials). Default: none.
    public var mirrors: [URL]
    /// Whether this request's tuning — `maximumBytesPerSecond` and `connections` — replaces the one a download saved
    /// as it is, unset values included, rather than only where it sets them (the default). For a caller that states
    /// its whole tuning each time, as a command line does: a rerun without a rate limit then runs unlimited. Not saved.
    public var replacesSavedTuning = false

    /// Creates options with the defaults: no extra headers, no expected digest, `.suggested` naming (not chosen), the
    /// file hashed.
    public init() {
        headers = [:]
        checksum = nil
        expectedMD5 = nil
        chosenNaming = nil
        computesChecksum = true
        priority = 0
        destination = nil
        maximumBytesPerSecond = nil
        connections = nil
        mirrors = []
    }

    /// Creates options.
    /// - Parameters:
    ///   - headers: extra request headers.
    ///   - checksum: the expected checksum, if known.
    ///   - expectedMD5: the expected MD5 as hex, if known (shorthand for an MD5 `checksum`).
    ///   - naming: how the completed file is named; `nil` leaves the default (`.suggested`) unchosen.
    ///   - computesChecksum: whether to hash the file when no checksum is expected (see `computesChecksum`).
    ///   - priority: which waiting download starts first (see `priority`).
    ///   - destination: the exact file to write, if not a name in the completed area (see `destination`).
    ///   - maximumBytesPerSecond: a bandwidth limit for this download (see `maximumBytesPerSecond`).
    ///   - connections: how many connections fetch the file at once (see `connections`).
    ///   - mirrors: other URLs of the same file (see `mirrors`).
    public init(
        headers: [String: String] = [:], checksum: Checksum? = nil, expectedMD5: String? = nil,
        naming: FileNaming? = nil, computesChecksum: Bool = true, priority: Int = 0, destination: URL? = nil,
        maximumBytesPerSecond: Int? = nil, connections: Int? = nil, mirrors: [URL] = []
    ) {
        self.headers = headers
        self.checksum = checksum
        self.expectedMD5 = expectedMD5
        self.chosenNaming = naming
        self.computesChecksum = computesChecksum
        self.priority = priority
        self.destination = destination
        self.maximumBytesPerSecond = maximumBytesPerSecond
        self.connections = connections
        self.mirrors = mirrors
    }

    /// Creates options, with `computesChecksum` under the name it had while MD5 was the only digest.
    @available(*, deprecated, message: "computesMD5 is computesChecksum")
    public init(
        headers: [String: String] = [:], checksum: Checksum? = nil, expectedMD5: String? = nil,
        naming: FileNaming? = nil, computesMD5: Bool, priority: Int = 0, destination: URL? = nil,
        maximumBytesPerSecond: Int? = nil, connections: Int? = nil, mirrors: [URL] = []
    ) {
        self.init(
            headers: headers, checksum: checksum, expectedMD5: expectedMD5, naming: naming,
            computesChecksum: computesMD5, priority: priority, destination: destination,
            maximumBytesPerSecond: maximumBytesPerSecond, connections: connections, mirrors: mirrors)
    }

    private enum CodingKeys: String, CodingKey {
        case headers, checksum, expectedMD5, naming, computesMD5, priority, destination
        case maximumBytesPerSecond, connections, mirrors
    }

    /// What these options (a request's) contradict in `existing` (those of the download it would join): where the file
    /// goes. A destination or a chosen naming says where; unset, it contradicts nothing.
    /// - Parameter existing: the download's options.
    /// - Returns: a sentence saying what differs, `nil` when nothing does.
    func contradiction(joining existing: DownloadOptions) -> String? {
        if let destination {
            guard destination.standardizedFileURL != existing.destination?.standardizedFileURL else { return nil }
            let there = existing.destination.map { "to \($0.path)" } ?? "into its completed folder"
            return "this request writes the file to \(destination.path), the download it would join \(there)"
        }
        guard let chosen = chosenNaming else { return nil }
        if let elsewhere = existing.destination {
            return
                "this request names the file \(chosen.phrase), the download it would join writes it to \(elsewhere.path)"
        }
        guard chosen != existing.naming else { return nil }
        return "this request names the file \(chosen.phrase), the download it would join \(existing.naming.phrase)"
    }

    /// The checksum the caller expects: `checksum`, else `expectedMD5`.
    /// - Throws: `DownloadError.invalidChecksum` when `expectedMD5` is not 32 hex digits.
    func expectation() throws(DownloadError) -> Checksum? {
        if let checksum { return checksum }
        guard let expectedMD5 else { return nil }
        guard let checksum = Checksum(md5: expectedMD5) else {
            throw .invalidChecksum(expectedMD5, reason: "an expected MD5 needs 32 hex digits")
        }
        return checksum
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        headers = try container.decodeIfPresent([String: String].self, forKey: .headers) ?? [:]
        checksum = try container.decodeIfPresent(Checksum.self, forKey: .checksum)
        expectedMD5 = try container.decodeIfPresent(String.self, forKey: .expectedMD5)
        chosenNaming = try container.decodeIfPresent(FileNaming.self, forKey: .naming)
        computesChecksum = try container.decodeIfPresent(Bool.self, forKey: .computesMD5) ?? true
        priority = try container.decodeIfPresent(Int.self, forKey: .priority) ?? 0
        destination = try container.decodeIfPresent(String.self, forKey: .destination).map {
            URL(fileURLWithPath: $0)
        }
        maximumBytesPerSecond = try container.decodeIfPresent(Int.self, forKey: .maximumBytesPerSecond)
        connections = try container.decodeIfPresent(Int.self, forKey: .connections)
        mirrors = try (container.decodeIfPresent([String].self, forKey: .mirrors) ?? []).compactMap(URL.init(string:))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(headers, forKey: .headers)
        try container.encodeIfPresent(checksum, forKey: .checksum)
        try container.encodeIfPresent(expectedMD5, forKey: .expectedMD5)
        try container.encodeIfPresent(chosenNaming, forKey: .naming)
        try container.encode(computesChecksum, forKey: .computesMD5)  // its 1.0 key
        if priority != 0 { try container.encode(priority, forKey: .priority) }
        try container.encodeIfPresent(destination?.path, forKey: .destination)
        try container.encodeIfPresent(maximumBytesPerSecond, forKey: .maximumBytesPerSecond)
        try container.encodeIfPresent(connections, forKey: .connections)
        if !mirrors.isEmpty { try container.encode(mirrors.map(\.absoluteString), forKey: .mirrors) }
    }
}

extension DownloadOptions {
    /// These options, asked of a download that keeps `kept` (it is suspended, failed, or known from before a
    /// restart): what this request sets replaces what the download keeps, and what it leaves at its default keeps the
    /// download's value — headers are merged name by name (in any letter case), mirrors are added, hashing stays on if
    /// either asks for it. Expected checksums are not merged here: the manager keeps every one it accepted (see
    /// `DownloadManager.download(_:options:)`).
    /// - Parameter kept: the options the download has.
    /// - Returns: the options it continues with.
    func merged(into kept: DownloadOptions) -> DownloadOptions {
        var merged = kept
        for (name, value) in headers {
            // A field's name in another letter case is the same field: two keys would go out in either order.
            let lowered = name.lowercased()
            for key in merged.headers.keys where key != name && key.lowercased() == lowered {
                merged.headers.removeValue(forKey: key)
            }
            merged.headers[name] = value
        }
        if let chosenNaming { merged.chosenNaming = chosenNaming }
        merged.computesChecksum = kept.computesChecksum || computesChecksum
        if priority != 0 { merged.priority = priority }
        if let destination { merged.destination = destination }
        if let maximumBytesPerSecond { merged.maximumBytesPerSecond = maximumBytesPerSecond }
        if let connections { merged.connections = connections }
        if replacesSavedTuning {
            merged.maximumBytesPerSecond = maximumBytesPerSecond
            merged.connections = connections
        }
        merged.mirrors += mirrors.filter { !kept.mirrors.contains($0) }
        return merged
    }
}
