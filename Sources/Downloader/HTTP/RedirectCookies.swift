import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The cookies a redirect chain sets, sent on the rest of that chain (as wget and aria2c do): a login or CDN gate
/// answers a 302 that sets a cookie and leads back to the same URL, which the cookie then opens. A value: scoped by
/// domain and path (RFC 6265), never sent to another host, kept in memory only.
struct RedirectCookies: Sendable, Equatable {
    struct Cookie: Sendable, Equatable {
        var name: String
        var value: String
        /// The host it was set by (host-only) or its `Domain` attribute (that domain and its subdomains).
        var domain: String
        var hostOnly: Bool
        var path: String
        var secure: Bool
    }

    private(set) var cookies: [Cookie] = []

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
                path: cookie.path.isEmpty ? "/" : cookie.path, secure: cookie.isSecure)
            cookies.removeAll { $0.name == entry.name && $0.domain == entry.domain && $0.path == entry.path }
            if let expires = cookie.expiresDate, expires <= Date() { continue }
            cookies.append(entry)
        }
    }

    /// The `Cookie` header value for a request to `url`, or `nil` when no cookie applies.
    func header(for url: URL) -> String? {
        guard let host = url.host?.lowercased() else { return nil }
        let path = url.path.isEmpty ? "/" : url.path
        let https = url.scheme?.lowercased() == "https"
        let matching = cookies.filter { cookie in
            let domainMatches =
                host == cookie.domain || (!cookie.hostOnly && host.hasSuffix("." + cookie.domain))
            let pathMatches =
                path == cookie.path
                || (path.hasPrefix(cookie.path)
                    && (cookie.path.hasSuffix("/") || path.dropFirst(cookie.path.count).hasPrefix("/")))
            return domainMatches && pathMatches && (!cookie.secure || https)
        }
        guard !matching.isEmpty else { return nil }
        return matching.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
    }
}
