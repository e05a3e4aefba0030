/// A list of URLs read as it streams (`downloader-fleet add FILE|-`): one URL a line, blank lines and `#` comments
/// skipped, cut into shards of a size, so that a list of any length costs the memory of one shard.
public struct URLList: Sendable {
    public let shardSize: Int
    private var current: [String] = []

    public init(shardSize: Int) {
        self.shardSize = max(1, shardSize)
    }

    /// One line of the list. - Returns: a full shard, when this line completes one.
    public mutating func line(_ text: Substring) -> [String]? {
        let trimmed = text.drop { $0 == " " || $0 == "\t" }
        guard let first = trimmed.first, first != "#" else { return nil }
        let url = String(trimmed.prefix { $0 != " " && $0 != "\t" && $0 != "\r" })
        guard !url.isEmpty else { return nil }
        current.append(url)
        guard current.count >= shardSize else { return nil }
        defer { current = [] }
        return current
    }

    /// The list ended. - Returns: the last shard, if any URLs are left.
    public mutating func end() -> [String]? {
        defer { current = [] }
        return current.isEmpty ? nil : current
    }
}
