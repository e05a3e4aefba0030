import Foundation

/// The on-disk layout of a manager's directory: `downloading/` holds partial files and their saved hash state,
/// `completed/` holds only whole, verified files.
struct DownloadDirectory: Sendable {
    let root: URL
    private let completedOverride: URL?

    /// - Parameters:
    ///   - root: holds the receipts and the downloading area.
    ///   - completed: where verified files go; `root/completed` when `nil`.
    init(root: URL, completed: URL? = nil) {
        self.root = root
        self.completedOverride = completed
    }

    var downloadingArea: URL { root.appendingPathComponent("downloading", isDirectory: true) }
    var completedArea: URL { completedOverride ?? root.appendingPathComponent("completed", isDirectory: true) }

    /// Creates the directory and both areas if needed.
    /// - Throws: `DownloadError.fileSystem` when they cannot be created.
    func createAreas() throws(DownloadError) {
        for area in [downloadingArea, completedArea] {
            do {
                try FileManager.default.createDirectory(at: area, withIntermediateDirectories: true)
            } catch {
                throw .fileSystem(nil, reason: "cannot create \(area.path): \(error.localizedDescription)")
            }
        }
    }

    /// The stem every local file of a download shares: the MD5 of its URL.
    static func key(for url: URL) -> String {
        MD5.hash(data: Array(url.absoluteString.utf8)).hexString
    }

    /// The partial file of a download.
    func partialFile(for url: URL) -> URL {
        downloadingArea.appendingPathComponent(Self.key(for: url) + ".part")
    }

    /// The saved transfer state beside the partial file.
    func stateFile(for url: URL) -> URL {
        downloadingArea.appendingPathComponent(Self.key(for: url) + ".part.json")
    }

    /// The default file name: `md5(url)` plus the URL's extension, if it has a sane one.
    static func defaultFilename(for url: URL) -> String {
        let ext = url.pathExtension
        let safeExtension =
            !ext.isEmpty && ext.utf8.count <= 16
            && ext.unicodeScalars.allSatisfy { $0.isASCII && $0.properties.isAlphabetic || ("0"..."9").contains($0) }
        return key(for: url) + (safeExtension ? "." + ext : "")
    }

    /// The name a completed file gets under `naming`.
    /// - Parameters:
    ///   - naming: the download's choice.
    ///   - url: the download's URL.
    ///   - suggested: the raw `Content-Disposition` name, if the server sent one.
    static func finalName(naming: FileNaming, url: URL, suggested: String?) -> String {
        switch naming {
        case .md5OfURL:
            return defaultFilename(for: url)
        case .suggested:
            if let name = suggested.flatMap(FilenameSanitizer.sanitize) { return name }
            let last = url.lastPathComponent.removingPercentEncoding ?? url.lastPathComponent
            if last != "/", let name = FilenameSanitizer.sanitize(last) { return name }
            return defaultFilename(for: url)
        case .custom(let name):
            return FilenameSanitizer.sanitize(name) ?? defaultFilename(for: url)
        }
    }

    /// Where a completed file goes: `completed/name`, or `name (1).ext`, `name (2).ext`, … when another file already
    /// has that name. `.md5OfURL` names belong to their URL, so such a file is replaced.
    func destination(for name: String, naming: FileNaming) -> URL {
        let first = completedArea.appendingPathComponent(name)
        if case .md5OfURL = naming { return first }
        guard FileManager.default.fileExists(atPath: first.path) else { return first }
        let ext = (name as NSString).pathExtension
        let stem = ext.isEmpty ? name : String(name.dropLast(ext.count + 1))
        for n in 1..<10_000 {
            let candidate = ext.isEmpty ? "\(stem) (\(n))" : "\(stem) (\(n)).\(ext)"
            let url = completedArea.appendingPathComponent(candidate)
            if !FileManager.default.fileExists(atPath: url.path) { return url }
        }
        return completedArea.appendingPathComponent("\(Self.key(for: URL(fileURLWithPath: name)))-\(UUID().uuidString)")
    }
}
