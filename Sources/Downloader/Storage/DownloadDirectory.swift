import Foundation

/// The on-disk layout of a manager.
///
/// ```
/// directory/
///   .downloader/        the state folder (`Configuration.stateDirectory`): no download can take its name
///     lock              held (flock) by the one manager that owns the directory
///     journal           the receipts, one JSON line per change
///     partial/          KEY.part (bytes so far) and KEY.state (hash state and version) of unfinished downloads
///   completed/          whole, verified files only (`Configuration.completedDirectory`)
/// ```
///
/// KEY is the MD5 of the URL. Every path is derived from the directory and a key or a sanitised name; nothing is
/// taken from saved state as a path. The state folder's files are reached only through `state`, by name relative to
/// descriptors of the folders (never through a symbolic link).
struct DownloadDirectory: Sendable {
    let root: URL
    /// Where state lives: the lock, the journal and the partial files.
    let stateArea: URL
    /// The state folder, opened on first use (`StateFolder.open()`), shared by every copy of this value.
    let state: StateFolder
    /// Where verified files go.
    let completedArea: URL
    /// Which download each delivered file belongs to, shared by every copy of this value.
    let claims = FileClaims()

    /// - Parameters:
    ///   - root: the manager's directory.
    ///   - completed: where verified files go; `root/completed` when `nil`.
    ///   - state: where state lives; `root/.downloader` when `nil`.
    init(root: URL, completed: URL? = nil, state: URL? = nil) {
        self.root = root
        completedArea = completed ?? root.appendingPathComponent("completed", isDirectory: true)
        stateArea = state ?? root.appendingPathComponent(".downloader", isDirectory: true)
        self.state = StateFolder(url: stateArea)
        partialArea = stateArea.appendingPathComponent("partial", isDirectory: true)
        partialPrefix = partialArea.path + "/"
        completedPrefix = completedArea.path + "/"
        // Each folder once: `dl -P DIR` has all three in one, which every transfer checked three times (issue #52).
        var areas: [(url: URL, path: String)] = []
        for area in [root, completedArea, stateArea.deletingLastPathComponent()]
        where !areas.contains(where: { $0.path == area.path }) {
            areas.append((area, area.path))
        }
        self.areas = areas
    }

    /// The folders `createAreas()` makes, with their paths: the root, the completed area, the state area's parent.
    private let areas: [(url: URL, path: String)]

    /// Partial files and their saved state.
    let partialArea: URL
    /// `partialArea.path` and a slash: paths built from it cost a third of `appendingPathComponent`, which shows when
    /// thousands of downloads are queued at once.
    private let partialPrefix: String
    /// `completedArea.path` and a slash (see `partialPrefix`).
    private let completedPrefix: String

    /// Where a download's verified file goes when its name is known before any response (`destination`, else the
    /// name the URL gives in the completed area), built without `URL`: a batch asks it of every request it reads.
    func deliveredFilePath(of url: URL, options: DownloadOptions) -> String {
        options.destination?.standardizedFileURL.path
            ?? completedPrefix + Self.finalName(naming: options.naming, url: url, suggested: nil)
    }
    /// The receipts journal.
    var journalFile: URL { stateArea.appendingPathComponent("journal") }

    /// Creates the directory and its areas if needed, and opens the state folder (mode 0700: it may hold
    /// credentials; see `StateFolder`).
    /// - Throws: `DownloadError.fileSystem` when they cannot be created, or the state folder is not ours.
    func createAreas() throws(DownloadError) {
        // The folders above the state area get the default mode; only the state area and its partial folder are
        // private, and they are created and checked by `StateFolder`.
        for (area, path) in areas {
            // Each transfer asks (a folder removed meanwhile is made again): one `stat` when it is there, where
            // FileManager's check cost 10,000 instructions a folder (issue #52).
            var info = stat()
            if stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR { continue }
            do {
                try FileManager.default.createDirectory(at: area, withIntermediateDirectories: true)
            } catch {
                throw .fileSystem(nil, reason: "cannot create \(area.path): \(error.localizedDescription)")
            }
        }
        try state.open()
    }

    /// The stem every local file of a download shares: the MD5 of its URL without credentials (they are no part of
    /// a download's identity).
    static func key(for url: URL) -> String {
        url.downloadIdentifier
    }

    /// The key an earlier version gave a URL with credentials (the MD5 of the whole URL), to take its files over.
    static func legacyKey(for url: URL) -> String {
        MD5.hash(data: Array(url.absoluteString.utf8)).hexString
    }

    /// The key of a name in the partial area written by this package (`KEY.part`, `KEY.state`), else `nil`.
    static func key(ofPartialName name: String) -> String? {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[1] == "part" || parts[1] == "state", parts[0].utf8.count == 32,
            parts[0].utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) })
        else { return nil }
        return String(parts[0])
    }

    /// The partial file of a download.
    func partialFile(for url: URL) -> URL {
        partialFile(key: Self.key(for: url))
    }

    /// The partial file of the download with this key.
    func partialFile(key: String) -> URL {
        URL(fileURLWithPath: partialPath(key: key), isDirectory: false)
    }

    /// The path of the partial file of the download with this key.
    private func partialPath(key: String) -> String {
        partialPrefix + key + ".part"
    }

    /// What a receipt names before its download has a file: the partial file, called the key and the URL's
    /// extension — both made only when read.
    /// - Parameters:
    ///   - key: the download's key (`key(for:)`).
    ///   - url: the download's URL.
    func receiptFile(key: String, url: URL) -> ReceiptFile {
        ReceiptFile(partialPath: partialPath(key: key), key: key, download: url)
    }

    /// The saved transfer state beside the partial file.
    func stateFile(for url: URL) -> URL {
        URL(fileURLWithPath: partialPrefix + Self.key(for: url) + ".state", isDirectory: false)
    }

    /// The completed file called `name` (a single sanitised component), or `nil` for a name that is not one. With a
    /// destination, the name must be the destination's own.
    func completedFile(named name: String, destination: URL? = nil) -> URL? {
        if let destination {
            return destination.lastPathComponent == name ? destination.standardizedFileURL : nil
        }
        guard FilenameSanitizer.sanitize(name) == name else { return nil }
        return completedArea.appendingPathComponent(name)
    }

    /// Where a verified file goes: the options' exact destination (replaced), the name that belongs to the URL
    /// (`.md5OfURL`, replaced), or the first free name in the completed area.
    /// - Parameters:
    ///   - options: the download's options.
    ///   - url: the download's URL.
    ///   - suggested: the raw `Content-Disposition` name, if the server sent one.
    func placementTarget(for options: DownloadOptions, url: URL, suggested: String?) -> FilePlacement.Target {
        if let destination = options.destination { return .replace(destination.standardizedFileURL) }
        let name = Self.finalName(naming: options.naming, url: url, suggested: suggested)
        if case .md5OfURL = options.naming { return .replace(completedArea.appendingPathComponent(name)) }
        return .unique(area: completedArea, name: name)
    }

    /// The default file name: `md5(url)` plus the URL's extension, if it has a sane one.
    static func defaultFilename(for url: URL, key: String? = nil) -> String {
        url.downloadFilename(key: key ?? Self.key(for: url))
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
            // Bytes, not `contains("%")`: Foundation's substring search cost 4,000 instructions a name (issue #52).
            var component = url.fileName
            let encoded = component.withUTF8 { $0.contains(UInt8(ascii: "%")) }
            let last = encoded ? component.removingPercentEncoding ?? component : component
            if last != "/", let name = FilenameSanitizer.sanitize(last) { return name }
            return defaultFilename(for: url)
        case .custom(let name):
            return FilenameSanitizer.sanitize(name) ?? defaultFilename(for: url)
        }
    }

    /// The names a completed file may take, in order: `name`, then `name (1).ext`, `name (2).ext`, … The first that
    /// is free is claimed atomically when the file is placed (`FilePlacement`).
    static func candidateNames(for name: String) -> some Sequence<String> {
        // The extension is looked for only once the name itself is taken (8,000 instructions a name; issue #52).
        sequence(state: (n: 0, parts: (stem: String, ext: String)?.none)) { state -> String? in
            defer { state.n += 1 }
            guard state.n > 0 else { return name }
            guard state.n < 10_000 else { return nil }
            if state.parts == nil {
                let ext = (name as NSString).pathExtension
                state.parts = (ext.isEmpty ? name : String(name.dropLast(ext.count + 1)), ext)
            }
            let (stem, ext) = state.parts!
            return ext.isEmpty ? "\(stem) (\(state.n))" : "\(stem) (\(state.n)).\(ext)"
        }
    }
}

/// Makes a server- or user-supplied name safe to use as one file name inside the download directory.
enum FilenameSanitizer {
    /// The longest name most file systems accept, in bytes.
    static let maximumLength = 255

    /// A safe file name, or `nil` when nothing usable is left.
    ///
    /// Keeps only the last path component (`/` and `\` both count as separators), removes control characters,
    /// leading dots and surrounding white space (so `..`, `.` and hidden names cannot appear), and shortens the name
    /// to 255 UTF-8 bytes, keeping its extension.
    /// - Parameter name: for example `"../../etc/passwd"` → `"passwd"`.
    static func sanitize(_ name: String) -> String? {
        isPlainlySafe(name) ? name : sanitizeFully(name)
    }

    /// Whether a name is already what `sanitizeFully(_:)` makes of it, by a rule that reads each byte once: printable
    /// ASCII without a space or a separator, not starting with a dot, at most 255 bytes. Most names are (`f/1.bin`'s
    /// `1.bin`), and the full rules cost about 20,000 instructions a name, twice per download of a list.
    static func isPlainlySafe(_ name: String) -> Bool {
        let bytes = name.utf8
        guard let first = bytes.first, first != UInt8(ascii: "."), bytes.count <= maximumLength else { return false }
        return bytes.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "\\") }
    }

    /// `sanitize(_:)`'s rules, applied in full.
    static func sanitizeFully(_ name: String) -> String? {
        let lastComponent = name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        var cleaned = String(
            String.UnicodeScalarView(
                lastComponent.unicodeScalars.filter { scalar in
                    !(scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) || scalar == "\u{FEFF}"
                        || (0x202a...0x202e).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value))
                }))
        // Trim white space and leading dots until neither is left: ". ." must not become ".".
        var previous: String
        repeat {
            previous = cleaned
            cleaned = trimmingBlanks(cleaned)
            while cleaned.hasPrefix(".") { cleaned.removeFirst() }
        } while cleaned != previous
        guard !cleaned.isEmpty else { return nil }
        return truncated(cleaned)
    }

    /// `name.trimmingCharacters(in: .whitespaces)` without its cost (it goes through `NSString`, which showed when a
    /// batch names every request of a long list): the same scalars as CoreFoundation's whitespace set — the tab, the
    /// space, U+00A0, U+1680, U+2000…U+200B, U+202F, U+205F, U+3000 — trimmed scalar by scalar.
    static func trimmingBlanks(_ name: String) -> String {
        func isBlank(_ scalar: Unicode.Scalar) -> Bool {
            switch scalar.value {
            case 0x09, 0x20, 0xA0, 0x1680, 0x2000...0x200B, 0x202F, 0x205F, 0x3000: return true
            default: return false
            }
        }
        let scalars = name.unicodeScalars
        guard let first = scalars.firstIndex(where: { !isBlank($0) }) else { return "" }
        let last = scalars.lastIndex(where: { !isBlank($0) }) ?? first
        return String(String.UnicodeScalarView(scalars[first...last]))
    }

    /// Shortens a name to `maximumLength` UTF-8 bytes on a character boundary, keeping a short extension.
    private static func truncated(_ name: String) -> String {
        guard name.utf8.count > maximumLength else { return name }
        var stem = name
        var ext = ""
        if let dot = name.lastIndex(of: "."), name.distance(from: dot, to: name.endIndex) <= 16 {
            stem = String(name[..<dot])
            ext = String(name[dot...])
        }
        while stem.utf8.count + ext.utf8.count > maximumLength, !stem.isEmpty { stem.removeLast() }
        return stem + ext
    }
}
