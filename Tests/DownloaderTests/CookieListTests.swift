import Foundation
import Testing

@testable import Downloader

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The cookies a redirect chain carries (issue #36): scoped by domain and path, never sent to another host.
@Suite("Redirect cookies")
struct CookieListTests {
    private func response(_ url: String, setCookie: [String]) -> HTTPURLResponse {
        // One header per cookie is what a server sends; Foundation's parser takes them joined by commas.
        HTTPURLResponse(
            url: URL(string: url)!, statusCode: 302, httpVersion: "HTTP/1.1",
            headerFields: ["Set-Cookie": setCookie.joined(separator: ", ")])!
    }

    @Test("A host-only cookie goes back to its host only, on its path")
    func hostOnly() {
        var cookies = CookieList()
        cookies.take(from: response("http://a.example/login/start", setCookie: ["gate=open; Path=/files"]))
        #expect(cookies.header(for: URL(string: "http://a.example/files/f.bin")!) == "gate=open")
        #expect(cookies.header(for: URL(string: "http://a.example/files")!) == "gate=open")
        #expect(cookies.header(for: URL(string: "http://a.example/filesystem")!) == nil, "a path prefix, not a segment")
        #expect(cookies.header(for: URL(string: "http://a.example/other")!) == nil)
        #expect(cookies.header(for: URL(string: "http://sub.a.example/files/f")!) == nil, "host-only")
        #expect(cookies.header(for: URL(string: "http://b.example/files/f")!) == nil, "never another host")
        #expect(cookies.header(for: URL(string: "http://a.example.evil/files/f")!) == nil)
    }

    @Test("A Domain cookie covers the domain and its subdomains; a Domain that does not cover the host is ignored")
    func domains() {
        var cookies = CookieList()
        cookies.take(from: response("http://www.example.org/", setCookie: ["s=1; Domain=example.org; Path=/"]))
        cookies.take(from: response("http://www.example.org/", setCookie: ["bad=1; Domain=other.org; Path=/"]))
        #expect(cookies.header(for: URL(string: "http://cdn.example.org/f")!) == "s=1")
        #expect(cookies.header(for: URL(string: "http://example.org/f")!) == "s=1")
        #expect(cookies.header(for: URL(string: "http://other.org/f")!) == nil)
        #expect(cookies.header(for: URL(string: "http://notexample.org/f")!) == nil)
    }

    @Test("A Secure cookie is sent over https only; a cookie set again replaces the old one; an expired one goes")
    func secureReplaceExpire() {
        var cookies = CookieList()
        cookies.take(from: response("https://h.example/", setCookie: ["t=1; Path=/; Secure"]))
        #expect(cookies.header(for: URL(string: "https://h.example/f")!) == "t=1")
        #expect(cookies.header(for: URL(string: "http://h.example/f")!) == nil)
        cookies.take(from: response("https://h.example/", setCookie: ["t=2; Path=/; Secure"]))
        #expect(cookies.header(for: URL(string: "https://h.example/f")!) == "t=2")
        cookies.take(
            from: response("https://h.example/", setCookie: ["t=3; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT"]))
        #expect(cookies.header(for: URL(string: "https://h.example/f")!) == nil)
    }
}
