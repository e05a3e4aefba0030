import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One request's redirects, as a value: whether to follow the next one and with which headers, tested without sockets
/// (`RedirectChainTests`).
///
/// - Up to `maximum` redirects; the same URL again is a loop only when it comes back with the same cookies (a login
///   or CDN gate answers a `302` to the same URL that sets a cookie, and the cookie then opens it).
/// - Credentials the caller set (`originBoundHeaders`) go to the original origin only (curl's rule since
///   CVE-2022-27776); every other header follows.
/// - Cookies the chain sets are sent on the rest of it, scoped by domain and path (`CookieList`); the caller's
///   own `Cookie` header is sent again only to the original origin. The header is built afresh on each hop, so no
///   cookie is sent twice.
struct RedirectChain: Sendable {
    /// What the next redirect gets.
    enum Decision: Sendable {
        /// Follow it with this request.
        case follow(URLRequest)
        /// Do not: the request fails with this error.
        case refuse(DownloadError)
    }

    /// Headers dropped when a redirect leads to another host, port or scheme; every other header follows.
    static let originBoundHeaders = ["Authorization", "Proxy-Authorization", "Cookie"]

    /// The URL the chain began with.
    let originalURL: URL
    /// The most redirects followed.
    let maximum: Int
    /// The first request: its `Cookie` header (the caller's) is sent again only to the original origin.
    private let firstRequest: URLRequest
    /// Each URL visited with the cookies it was asked with (`URL`, a NUL, the `Cookie` value); made at the first
    /// redirect (most requests have none: 6,000 instructions a request; issue #52).
    private var visited: Set<String> = []
    /// Cookies the chain set.
    private var cookies = CookieList()

    /// Starts a chain at `request`'s URL.
    /// - Parameters:
    ///   - request: the first request (its URL, its `Cookie` header).
    ///   - maximum: the most redirects to follow.
    init(request: URLRequest, maximum: Int) {
        originalURL = request.url ?? URL(fileURLWithPath: "/")
        self.maximum = maximum
        firstRequest = request
    }

    /// The server answered `response`, a redirect to `request` (URLSession's proposal, with every header).
    /// - Returns: the request to send next, or why not.
    mutating func redirect(_ response: HTTPURLResponse, to request: URLRequest) -> Decision {
        guard let target = request.url else {
            return .refuse(.tooManyRedirects(originalURL, reason: "a redirect without a target"))
        }
        // Only http and https are followed. The `Location` itself is read too: URLSession turns some targets of
        // another scheme (`file:/etc/passwd`) into a path on the same server.
        let location = response.value(forHTTPHeaderField: "Location") ?? ""
        let stated = location.firstIndex(of: ":").map { location[..<$0].lowercased() }
        let schemeIsStated =
            stated.map { !$0.isEmpty && $0.allSatisfy { $0.isLetter || $0.isNumber || "+-.".contains($0) } } ?? false
        let scheme = schemeIsStated ? stated! : (target.scheme?.lowercased() ?? "")
        guard scheme == "http" || scheme == "https", ["http", "https"].contains(target.scheme?.lowercased() ?? "")
        else {
            return .refuse(.unsupportedRedirect(originalURL, to: schemeIsStated ? location : target.absoluteString))
        }
        cookies.take(from: response)
        let chainCookies = cookies.header(for: target)
        let visit = target.absoluteString + "\u{0}" + (chainCookies ?? "")
        if visited.isEmpty { visited.insert(originalURL.absoluteString + "\u{0}") }
        if visited.contains(visit) {
            return .refuse(.tooManyRedirects(originalURL, reason: "redirect loop at \(target.redactedAbsoluteString)"))
        }
        visited.insert(visit)
        if visited.count - 1 > maximum {
            return .refuse(.tooManyRedirects(originalURL, reason: "more than \(maximum) redirects"))
        }
        var next = request
        let sameOrigin = Self.isSameOrigin(target, originalURL)
        if !sameOrigin {
            for name in Self.originBoundHeaders { next.setValue(nil, forHTTPHeaderField: name) }
        }
        let callerCookie = sameOrigin ? firstRequest.value(forHTTPHeaderField: "Cookie") : nil
        let sent = [callerCookie, chainCookies].compactMap { $0 }
        next.setValue(sent.isEmpty ? nil : sent.joined(separator: "; "), forHTTPHeaderField: "Cookie")
        return .follow(next)
    }

    /// Whether two URLs share scheme, host and port (the default port counts as that port).
    static func isSameOrigin(_ a: URL, _ b: URL) -> Bool {
        a.origin == b.origin
    }
}
