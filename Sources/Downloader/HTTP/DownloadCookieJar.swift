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

/// Cookies as a value, scoped by domain and path (RFC 6265), never sent to another host: the ones a redirect chain
/// sets (`RedirectChain`: a login or CDN gate answers a 302 that sets a cookie and leads back to the same URL, which
/// the cookie then opens, as wget and aria2c follow it), and a manager's `DownloadCookieJar`.
struct CookieList: Sendable, Equatable {
    struct Cookie: Sendable, Equatable {
        var name: String
        var value: String
        /// The host it was set by (host-only) or its `Domain` attribute (that domain and its subdomains).
        var domain: String
        var hostOnly: Bool
        var path: String
        var secure: Bool
        /// When it expires; `nil` for a session cookie.
        var expires: Date?
        var httpOnly = false
    }

    /// Where a cookie is in `slots`, by what identifies it.
    private struct Key: Hashable, Sendable {
        let name: String
        let domain: String
        let path: String

        init(_ cookie: Cookie) {
            name = cookie.name
            domain = cookie.domain
            path = cookie.path
        }
    }

    /// The cookies in the order they were set (a replaced one moves to the end); `nil` where one was replaced or
    /// removed. Each cookie is found through `slotOfKey`, and a request's through `slotsByDomain`, so reading a file
    /// of N cookies takes time in N (comparing each with all before it took 19–22 s for 100,001 lines).
    private var slots: [Cookie?] = []
    private var slotOfKey: [Key: Int] = [:]
    /// The slots of each domain's cookies, in order (some may be `nil` since).
    private var slotsByDomain: [String: [Int]] = [:]
    private var emptySlots = 0

    /// The cookies, in the order they were set.
    var cookies: [Cookie] { slots.compactMap { $0 } }

    /// How many cookies there are.
    var count: Int { slotOfKey.count }

    static func == (lhs: CookieList, rhs: CookieList) -> Bool { lhs.cookies == rhs.cookies }

    /// Takes the `Set-Cookie` headers of a response (a cookie that expires now is dropped).
    mutating func take(from response: HTTPURLResponse) {
        // Most responses set none: one header look-up, not a copy of every header (about 39,000 instructions a
        // response in a list of small files, BENCHMARKS.md).
        guard response.value(forHTTPHeaderField: "Set-Cookie") != nil else { return }
        guard let url = response.url, let host = url.host?.lowercased() else { return }
        var fields: [String: String] = [:]
        for case (let name as String, let value as String) in response.allHeaderFields { fields[name] = value }
        for cookie in HTTPCookie.cookies(withResponseHeaderFields: fields, for: url) {
            let declared = cookie.domain.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "."))
            // A Domain attribute must cover the host that set it (RFC 6265 §5.3); otherwise the cookie is ignored.
            let hostOnly = declared.isEmpty || declared == host
            guard hostOnly || host.hasSuffix("." + declared) else { continue }
            let entry = Cookie(
                name: cookie.name, value: cookie.value, domain: hostOnly ? host : declared, hostOnly: hostOnly,
                path: cookie.path.isEmpty ? "/" : cookie.path, secure: cookie.isSecure, expires: cookie.expiresDate,
                httpOnly: cookie.isHTTPOnly)
            add(entry)
        }
    }

    /// Adds a cookie in place of the one with its name, domain and path; one that has expired only removes it.
    mutating func add(_ cookie: Cookie) {
        let key = Key(cookie)
        if let slot = slotOfKey.removeValue(forKey: key) {
            slots[slot] = nil
            emptySlots += 1
        }
        if let expires = cookie.expires, expires <= Date() { return compactIfSparse() }
        append(cookie, key: key)
        compactIfSparse()
    }

    private mutating func append(_ cookie: Cookie, key: Key) {
        slotOfKey[key] = slots.count
        slotsByDomain[cookie.domain, default: []].append(slots.count)
        slots.append(cookie)
    }

    /// Packs the slots again once most are empty (replacements and removals), so memory follows the live cookies.
    private mutating func compactIfSparse() {
        guard emptySlots > 64, emptySlots * 2 > slots.count else { return }
        let live = cookies
        slots = []
        slotOfKey = [:]
        slotsByDomain = [:]
        emptySlots = 0
        for cookie in live { append(cookie, key: Key(cookie)) }
    }

    /// The `Cookie` header value for a request to `url`, or `nil` when no cookie applies.
    func header(for url: URL) -> String? {
        // Most lists never meet a cookie: no host or path is worked out for them (12,000 instructions a request).
        guard !slots.isEmpty, let host = url.host?.lowercased() else { return nil }
        let path = url.path.isEmpty ? "/" : url.path
        let https = url.scheme?.lowercased() == "https"
        // The host's own cookies and those of every domain above it (`a.b.example` → `b.example` → `example`).
        var candidates: [Int] = []
        var domain = Substring(host)
        while true {
            candidates += slotsByDomain[String(domain)] ?? []
            guard let dot = domain.firstIndex(of: ".") else { break }
            domain = domain[domain.index(after: dot)...]
        }
        candidates.sort()
        let matching = candidates.compactMap { slots[$0] }.filter { cookie in
            let domainMatches =
                host == cookie.domain || (!cookie.hostOnly && host.hasSuffix("." + cookie.domain))
            let pathMatches =
                path == cookie.path
                || (path.hasPrefix(cookie.path)
                    && (cookie.path.hasSuffix("/") || path.dropFirst(cookie.path.count).hasPrefix("/")))
            let live = cookie.expires.map { $0 > Date() } ?? true
            return domainMatches && pathMatches && (!cookie.secure || https) && live
        }
        guard !matching.isEmpty else { return nil }
        return matching.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
    }

    /// Two `Cookie` header values as one, the first's cookie winning where both name one.
    static func merge(_ first: String?, _ second: String?) -> String? {
        func pairs(_ header: String?) -> [Substring] {
            (header ?? "").split(separator: ";").map { $0.drop { $0 == " " } }.filter { !$0.isEmpty }
        }
        func name(_ pair: Substring) -> Substring { pair.prefix { $0 != "=" } }
        let kept = pairs(first)
        let names = Set(kept.map(name))
        let all = kept + pairs(second).filter { !names.contains(name($0)) }
        return all.isEmpty ? nil : all.joined(separator: "; ")
    }
}
