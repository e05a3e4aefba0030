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
        /// The partial file at `path`, named `download.downloadFilename(key: key)`.
        case partial(path: String, key: String, download: URL)
    }

    private var storage: Storage

    /// A file given outright.
    init(url: URL, name: String) {
        storage = .given(url: url, name: name)
    }

    /// The partial file of a download, made when read.
    /// - Parameters:
    ///   - path: the partial file's path (`DownloadDirectory.receiptFile(key:url:)` makes it).
    ///   - key: the download's key (`URL.downloadIdentifier`).
    ///   - download: the download's URL, whose extension the name keeps.
    init(partialPath path: String, key: String, download: URL) {
        storage = .partial(path: path, key: key, download: download)
    }

    /// The file.
    var url: URL {
        switch storage {
        case .given(let url, _): url
        case .partial(let path, _, _): URL(fileURLWithPath: path, isDirectory: false)
        }
    }

    /// The file's name as the receipt shows it.
    var name: String {
        switch storage {
        case .given(_, let name): name
        case .partial(_, let key, let download): download.downloadFilename(key: key)
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
