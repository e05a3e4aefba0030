import Foundation

/// A download's identity in the manager's tables: its URL (without credentials), with the URL's hash computed once.
///
/// A `URL` hashes its whole text at every look-up (about 330 instructions); the manager's tables looked a small
/// file's URL up about 60 times (issue #52). A key made once, when a request arrives, and carried along hashes one
/// integer instead, and two copies of it compare by identity.
struct DownloadKey: Hashable, Sendable, CustomStringConvertible {
    /// The download's URL.
    let url: URL
    private let urlHash: Int

    /// Creates the key of `url`.
    init(_ url: URL) {
        self.url = url
        urlHash = url.hashValue
    }

    static func == (lhs: DownloadKey, rhs: DownloadKey) -> Bool {
        lhs.urlHash == rhs.urlHash && lhs.url == rhs.url
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(urlHash)
    }

    var description: String { url.absoluteString }
}
