import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

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
        guard let host = url.host?.lowercased() else { return nil }
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
