import Foundation

/// The file a receipt names, and its name: given outright (a completed file, a decoded receipt, a caller's), or the
/// partial file of a download that has no file yet, whose URL and name are made only when read.
///
/// Most small files of a batch complete before anyone reads their first receipt's file, and making its URL and name at
/// the request cost about 13,000 instructions a file (issue #52). Two values are equal when their URLs and names are,
/// however each was made.
struct ReceiptFile: Sendable {
    private enum Storage: Sendable, Equatable {
        case given(url: URL, name: String)
        /// `prefix + key + ".part"`, named `DownloadDirectory.defaultFilename(for: download, key: key)`.
        case partial(prefix: String, key: String, download: URL)
    }

    private var storage: Storage

    /// A file given outright.
    init(url: URL, name: String) {
        storage = .given(url: url, name: name)
    }

    /// The partial file of a download, made when read.
    /// - Parameters:
    ///   - prefix: the partial area's path and a slash.
    ///   - key: the download's key (`DownloadDirectory.key(for:)`).
    ///   - download: the download's URL, whose extension the name keeps.
    init(partialPrefix prefix: String, key: String, download: URL) {
        storage = .partial(prefix: prefix, key: key, download: download)
    }

    /// The file.
    var url: URL {
        switch storage {
        case .given(let url, _): url
        case .partial(let prefix, let key, _): DownloadDirectory.partialFile(prefix: prefix, key: key)
        }
    }

    /// The file's name as the receipt shows it.
    var name: String {
        switch storage {
        case .given(_, let name): name
        case .partial(_, let key, let download): DownloadDirectory.defaultFilename(for: download, key: key)
        }
    }
}

extension ReceiptFile: Hashable {
    static func == (lhs: Self, rhs: Self) -> Bool {
        // The same recipe makes the same file: compared without making either.
        if lhs.storage == rhs.storage { return true }
        return lhs.url == rhs.url && lhs.name == rhs.name
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(url)
        hasher.combine(name)
    }
}

extension ReceiptFile: CustomReflectable {
    /// The file and its name, as a stored pair shows them (`dump` of a receipt).
    var customMirror: Mirror {
        Mirror(self, children: ["url": url, "name": name])
    }
}
