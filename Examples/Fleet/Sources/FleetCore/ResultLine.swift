import Foundation

/// One URL's final result, as `dl --result-log` writes it (`url`, `status` ok|failed, `path`, `size`, `digest`,
/// `time`, `error`) plus the `node` that fetched it: what `downloader-fleet results` prints, one JSON line per URL.
public struct ResultLine: Sendable, Equatable, Codable {
    public var url: String
    /// `ok` or `failed`.
    public var status: String
    public var path: String?
    public var size: Int64?
    public var digest: String?
    /// ISO 8601.
    public var time: String
    public var error: String?
    public var node: String

    public init(
        url: String, status: String, path: String? = nil, size: Int64? = nil, digest: String? = nil, time: String,
        error: String? = nil, node: String
    ) {
        self.url = url
        self.status = status
        self.path = path
        self.size = size
        self.digest = digest
        self.time = time
        self.error = error
        self.node = node
    }

    /// The line as JSON (sorted keys, slashes unescaped, no null fields), without its line break.
    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
