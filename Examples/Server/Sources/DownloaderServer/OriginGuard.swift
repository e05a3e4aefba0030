import Hummingbird

/// Refuses requests that a web page of another origin makes (a browser sends their `Origin`), so that a site the
/// user visits cannot add downloads to a service on their machine; scripts and aria2 clients send no `Origin`.
/// `--rpc-allow-origin-all` (aria2's flag) lets every origin in instead, for web front-ends served elsewhere.
///
/// On a loopback bind it also refuses a `Host` (and an `Origin`) that is not a loopback name or `--host`'s: a page
/// of a site whose name the attacker points at 127.0.0.1 after loading it (DNS rebinding) sends its own name in both,
/// so comparing the two alone let it in.
struct OriginGuard<Context: RequestContext>: RouterMiddleware {
    /// The host names a request may name; `nil`: any (a bind to another address, reached by names we cannot know).
    let allowedHosts: Set<String>?
    /// Whether pages of every origin may call (`--rpc-allow-origin-all`): then only the host names are checked.
    let allowsEveryOrigin: Bool

    init(allowedHosts: Set<String>?, allowsEveryOrigin: Bool = false) {
        self.allowedHosts = allowedHosts
        self.allowsEveryOrigin = allowsEveryOrigin
    }

    /// The names a service bound to `host` answers to: loopback names and `host` itself when `host` is a loopback
    /// address or name, else `nil` (any).
    static func allowedHosts(boundTo host: String) -> Set<String>? {
        let loopback: Set<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
        guard loopback.contains(host.lowercased()) || host.hasPrefix("127.") else { return nil }
        return loopback.union([host.lowercased()])
    }

    /// Why a request naming `host` (its `Host`) from `origin` is refused, or `nil` when it is served.
    static func refusal(host: String, origin: String?, allowedHosts: Set<String>?, allowsEveryOrigin: Bool)
        -> String?
    {
        if let allowedHosts {
            let name = Self.name(ofAuthority: host)
            guard allowedHosts.contains(name) else { return "requests for host \(host) are refused" }
        }
        guard let origin, !allowsEveryOrigin else { return nil }
        // A page's origin is http or https; `ws://…` is what WebSocket libraries (not browsers) send of their own.
        if origin.hasPrefix("ws://") || origin.hasPrefix("wss://") { return nil }
        guard origin == "http://\(host)" || origin == "https://\(host)" else {
            return "requests from \(origin) are refused (start with --rpc-allow-origin-all to allow)"
        }
        return nil
    }

    /// `example.org` of `example.org:6800`, `::1` of `[::1]:6800`, lowercased.
    static func name(ofAuthority authority: String) -> String {
        var text = Substring(authority.lowercased())
        if text.hasPrefix("["), let end = text.firstIndex(of: "]") {
            return String(text[text.index(after: text.startIndex)..<end])
        }
        if let colon = text.lastIndex(of: ":") { text = text[..<colon] }
        return String(text)
    }

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let host = request.head.authority ?? ""
        if let reason = Self.refusal(
            host: host, origin: request.headers[.origin], allowedHosts: allowedHosts,
            allowsEveryOrigin: allowsEveryOrigin)
        {
            return Response(
                status: .forbidden, headers: [.contentType: "text/plain"],
                body: .init(byteBuffer: ByteBuffer(string: reason + "\n")))
        }
        return try await next(request, context)
    }
}
