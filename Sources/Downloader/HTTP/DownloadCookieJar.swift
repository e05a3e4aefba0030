import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A manager's cookies (`DownloadManager.Configuration.cookies`): sent with every request they match, scoped by
/// domain and path (never to another host), and updated by every `Set-Cookie` a response carries — a login page's
/// session, a CDN's gate. Read from and written to the Netscape cookie file that curl, wget and aria2c share
/// (`dl --load-cookies` / `--save-cookies`).
///
/// Cookies are secrets: the manager never writes them anywhere itself (not to its journal, not to a partial file's
/// state); only `write(to:)` does, where the caller asks, with mode 0600.
public final class DownloadCookieJar: Sendable {
    let list: Locked<CookieList>

    /// An empty jar.
    public init() {
        list = Locked(CookieList())
    }

    /// A jar with the cookies of a Netscape cookie file (`# Netscape HTTP Cookie File`; tab-separated domain,
    /// subdomains flag, path, secure flag, expiry in seconds since 1970 or 0, name, value; `#HttpOnly_` before a
    /// domain marks an HTTP-only cookie). Expired cookies are skipped; so are lines that are not cookies.
    /// - Parameter file: the cookie file.
    /// - Throws: `DownloadError.fileSystem` when the file cannot be read.
    public convenience init(contentsOf file: URL) throws(DownloadError) {
        self.init()
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch {
            throw .fileSystem(file, reason: "cannot read the cookie file \(file.path): \(error.localizedDescription)")
        }
        // Bytes, not Characters: a file of 100,001 lines is read in a fraction of a second.
        let bytes = [UInt8](data)
        list.withLock { list in
            for line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
                if let cookie = Self.cookie(netscapeLine: line) { list.add(cookie) }
            }
        }
    }

    /// How many cookies it holds.
    public var count: Int { list.withLock { $0.count } }

    /// Writes the cookies in the Netscape format (a session cookie's expiry is 0), replacing `file` atomically, with
    /// mode 0600.
    /// - Parameter file: where to write.
    /// - Throws: `DownloadError.fileSystem` when it cannot be written.
    public func write(to file: URL) throws(DownloadError) {
        var text = "# Netscape HTTP Cookie File\n# Written by Downloader \(LibraryVersion.current). Holds secrets.\n\n"
        for cookie in list.withLock({ $0.cookies }) {
            let domain = (cookie.httpOnly ? "#HttpOnly_" : "") + (cookie.hostOnly ? "" : ".") + cookie.domain
            let expires = cookie.expires.map { String(Int64($0.timeIntervalSince1970)) } ?? "0"
            text +=
                [
                    domain, cookie.hostOnly ? "FALSE" : "TRUE", cookie.path, cookie.secure ? "TRUE" : "FALSE", expires,
                    cookie.name, cookie.value,
                ].joined(separator: "\t") + "\n"
        }
        let temporary = AtomicFile.temporaryFile(beside: file)
        do {
            let fd = try AtomicFile.create(temporary, mode: 0o600)
            defer { close(fd) }
            try Array(text.utf8).withUnsafeBytes { try AtomicFile.writeAll(fd, $0) }
            guard rename(temporary.path, file.path) == 0 else { throw POSIXError.current }
        } catch {
            unlink(temporary.path)
            throw .fileSystem(file, reason: "cannot write the cookie file \(file.path): \(error.localizedDescription)")
        }
    }

    /// The `Cookie` header value for a request to `url`, or `nil`.
    func header(for url: URL) -> String? {
        list.withLock { $0.header(for: url) }
    }

    /// Takes a response's `Set-Cookie` headers.
    func take(from response: HTTPURLResponse) {
        list.withLock { $0.take(from: response) }
    }

    /// One line of a Netscape cookie file, `nil` for a comment, a blank or a malformed line.
    static func cookie(netscapeLine text: String) -> CookieList.Cookie? {
        cookie(netscapeLine: ArraySlice(text.utf8))
    }

    private static let httpOnlyMarker = Array("#HttpOnly_".utf8)

    /// One line of a Netscape cookie file as bytes (without its line feed).
    static func cookie(netscapeLine bytes: ArraySlice<UInt8>) -> CookieList.Cookie? {
        var line = bytes
        while line.last == UInt8(ascii: "\r") { line.removeLast() }
        var httpOnly = false
        if line.starts(with: httpOnlyMarker) {
            httpOnly = true
            line.removeFirst(httpOnlyMarker.count)
        } else if line.first == UInt8(ascii: "#") {
            return nil
        }
        let fields = line.split(separator: UInt8(ascii: "\t"), omittingEmptySubsequences: false).map {
            String(decoding: $0, as: UTF8.self)
        }
        guard fields.count == 6 || fields.count == 7, !fields[0].isEmpty, !fields[5].isEmpty,
            let seconds = Int64(fields[4])
        else { return nil }
        let dotted = fields[0].hasPrefix(".")
        let domain = (dotted ? String(fields[0].dropFirst()) : fields[0]).lowercased()
        guard !domain.isEmpty else { return nil }
        return CookieList.Cookie(
            name: fields[5], value: fields.count == 7 ? fields[6] : "", domain: domain,
            hostOnly: !dotted && fields[1].uppercased() != "TRUE", path: fields[2].isEmpty ? "/" : fields[2],
            secure: fields[3].uppercased() == "TRUE",
            expires: seconds == 0 ? nil : Date(timeIntervalSince1970: TimeInterval(seconds)), httpOnly: httpOnly)
    }
}
