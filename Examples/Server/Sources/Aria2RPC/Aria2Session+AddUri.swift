import Downloader
import Foundation

extension Aria2Session {
    /// The options `aria2.addUri` takes: `dir`, `out`, `checksum`, `header`, `split` (connections), `pause`; the
    /// others are refused rather than ignored.
    static let addUriOptions: Set<String> = [
        "dir", "out", "checksum", "header", "split", "max-connection-per-server", "pause", "continue",
    ]

    /// `aria2.addUri(uris[, options[, position]])`: the first URI is the download, the others its mirrors. The
    /// position is not used (the queue is first come, first served).
    func addUri(_ params: Parameters) async throws(Aria2Error) -> String {
        let uris = try params.strings(0, "uris")
        let options = try params.object(1, "options")
        if params.values.count > 2 { _ = try params.integer(2, "position") }
        guard !uris.isEmpty else { throw .invalidParams("uris must hold at least one URI") }
        var urls: [URL] = []
        for text in uris {
            guard let url = URL(string: text), let scheme = url.scheme?.lowercased(),
                ["http", "https"].contains(scheme),
                url.host != nil
            else { throw .refused("\(text) is not an http or https URI") }
            urls.append(url)
        }
        var request = DownloadOptions()
        request.mirrors = Array(urls.dropFirst())
        let destination = try destination(for: urls[0], options)
        if let destination { request.destination = destination }
        if let out = options["out"]?.string, destination == nil { request.naming = .custom(out) }
        for name in options.keys where !Self.addUriOptions.contains(name) {
            throw .refused("option \(name) is not supported by downloader-server")
        }
        if let checksum = options["checksum"] {
            guard let text = checksum.string, let parsed = try? Checksum(parsing: text) else {
                throw .invalidParams("checksum must be TYPE=DIGEST, e.g. sha-256=…")
            }
            request.checksum = parsed
        }
        for line in try Self.headerLines(options["header"]) {
            guard let colon = line.firstIndex(of: ":") else { throw .invalidParams("header \(line) has no colon") }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            let token = CharacterSet(charactersIn: "!#$%&'*+-.^_`|~0123456789").union(.letters)
            guard !name.isEmpty, name.unicodeScalars.allSatisfy({ $0.isASCII && token.contains($0) }),
                !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" })
            else { throw .invalidParams("header \(line) is not a valid header line") }
            request.headers[name] = value
        }
        if let split = (options["split"] ?? options["max-connection-per-server"]) {
            guard let count = split.integer, (1...16).contains(count) else {
                throw .invalidParams("split must be an integer from 1 to 16")
            }
            request.connections = count
        }
        // `pause` and `continue` as aria2 takes them, a boolean or its string (a JSON `true` was ignored).
        var pause = false
        for name in ["pause", "continue"] {
            guard let value = options[name] else { continue }
            guard let flag = value.flag else { throw .invalidParams("\(name) must be true or false") }
            if name == "pause" { pause = flag }
        }
        // A download of this URL underway with another `out`, `dir` or checksum: aria2's error, not a silent join
        // that drops them (equal options join it, as before).
        if let refusal = await manager.refusal(ofRequestFor: urls[0], options: request) {
            throw .refused(refusal.reason)
        }
        let receipt = await manager.enqueue(urls[0], options: request)
        let gid = Self.gid(of: receipt)
        self.urls[gid] = receipt.url
        removed.removeAll { $0.gid == gid }
        // Where it will land, for tellStatus and getOption before it completes (the URL's name said otherwise).
        if let destination {
            destinations[receipt.url] = destination
        } else if let out = options["out"]?.string {
            destinations[receipt.url] = directory.appendingPathComponent(out)
        }
        if pause { await manager.suspend(receipt.url) }
        return gid
    }

    /// `header`: one `Name: value` string or an array of them.
    static func headerLines(_ value: JSONValue?) throws(Aria2Error) -> [String] {
        switch value {
        case nil: return []
        case .string(let line): return [line]
        case .array(let lines):
            var strings: [String] = []
            for line in lines {
                guard let string = line.string else { throw .invalidParams("header must hold strings") }
                strings.append(string)
            }
            return strings
        default: throw .invalidParams("header must be a string or an array of strings")
        }
    }

    /// The file a download with `dir` (or an `out` with folders) goes to, inside the service's directory; `nil` when
    /// it goes to the directory itself under the server's or the URL's name.
    func destination(for url: URL, _ options: [String: JSONValue]) throws(Aria2Error) -> URL? {
        let dir = options["dir"]?.string
        let out = options["out"]?.string
        if let out, out.isEmpty || out.hasSuffix("/") { throw .invalidParams("out must name a file") }
        guard dir != nil || out?.contains("/") == true else {
            if let out {
                try Self.refuseLinks(to: directory.appendingPathComponent(out), below: directory)
            }
            return nil
        }
        var folder = directory
        if let dir {
            folder =
                dir.hasPrefix("/")
                ? URL(fileURLWithPath: dir).standardizedFileURL
                : directory.appendingPathComponent(dir).standardizedFileURL
        }
        let name =
            out
            ?? (url.lastPathComponent.isEmpty || url.lastPathComponent == "/" ? "index.html" : url.lastPathComponent)
        let file = folder.appendingPathComponent(name).standardizedFileURL
        let root = directory.path.hasSuffix("/") ? directory.path : directory.path + "/"
        guard file.path.hasPrefix(root) else {
            throw .refused("dir and out must stay inside \(directory.path)")
        }
        // Hidden names are the service's own (its state lives in DIR/.downloader).
        guard !file.path.dropFirst(root.count).split(separator: "/").contains(where: { $0.hasPrefix(".") }) else {
            throw .refused("dir and out must not name hidden folders or files")
        }
        try Self.refuseLinks(to: file, below: directory)
        // Straight into the directory: the manager's naming (`out`, or the server's or URL's name) is enough.
        return file.deletingLastPathComponent().standardizedFileURL.path == directory.path ? nil : file
    }

    /// Refuses a file whose folder leads outside `directory` through a symbolic link (`DIR/link → /elsewhere`), or
    /// that is a link itself: the folders that exist are resolved, and must stay beneath the resolved `directory`.
    /// (What does not exist yet has no link in it; the manager creates the missing folders.)
    static func refuseLinks(to file: URL, below directory: URL) throws(Aria2Error) {
        let root = directory.resolvingSymlinksInPath().standardizedFileURL.path
        var existing = file.deletingLastPathComponent().standardizedFileURL
        while !FileManager.default.fileExists(atPath: existing.path) && existing.path != "/" {
            existing = existing.deletingLastPathComponent()
        }
        let resolved = existing.resolvingSymlinksInPath().standardizedFileURL.path
        guard resolved == root || resolved.hasPrefix(root.hasSuffix("/") ? root : root + "/") else {
            throw .refused("dir and out must stay inside \(directory.path) (a link leads elsewhere)")
        }
        if let type = try? FileManager.default.attributesOfItem(atPath: file.path)[.type] as? FileAttributeType,
            type == .typeSymbolicLink
        {
            throw .refused("\(file.lastPathComponent) is a link: dir and out must name a file inside \(directory.path)")
        }
    }
}
