import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One request's redirects as a value (issue #36): loops, the limit, credentials and cookies on each hop.
@Suite("Redirect chain")
struct RedirectChainTests {
    private func redirect(
        _ chain: inout RedirectChain, from: String, to: String, setCookie: String? = nil,
        headers: [String: String] = [:]
    ) -> RedirectChain.Decision {
        let response = HTTPURLResponse(
            url: URL(string: from)!, statusCode: 302, httpVersion: "HTTP/1.1",
            headerFields: setCookie.map { ["Set-Cookie": $0, "Location": to] } ?? ["Location": to])!
        var proposal = URLRequest(url: URL(string: to)!)
        // URLSession proposes the next request with every header of the first (the platform notes).
        for (name, value) in headers { proposal.setValue(value, forHTTPHeaderField: name) }
        return chain.redirect(response, to: proposal)
    }

    private func first(_ url: String, headers: [String: String]) -> URLRequest {
        var request = URLRequest(url: URL(string: url)!)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return request
    }

    @Test("A redirect to another scheme is refused, also when URLSession made a same-server path of it (issue #48)")
    func otherSchemesRefused() {
        let url = "http://h.example/f"
        for (location, proposal) in [
            ("file:///etc/passwd", "file:///etc/passwd"), ("file:/etc/passwd", "http://h.example/etc/passwd"),
            ("ftp://h.example/x", "ftp://h.example/x"), ("HTTPS://h.example/ok", "https://h.example/ok"),
            ("/relative/ok", "http://h.example/relative/ok"), ("other:stuff", "http://h.example/other:stuff"),
        ] {
            var chain = RedirectChain(request: first(url, headers: [:]), maximum: 10)
            let response = HTTPURLResponse(
                url: URL(string: url)!, statusCode: 302, httpVersion: "HTTP/1.1", headerFields: ["Location": location])!
            let decision = chain.redirect(response, to: URLRequest(url: URL(string: proposal)!))
            let followed: Bool
            switch decision {
            case .follow: followed = true
            case .refuse(let error): followed = !(error == .unsupportedScheme)
            }
            #expect(followed == location.hasSuffix("/ok"), "\(location)")
        }
    }

    @Test("A 302 to the same URL that sets a cookie is followed with it; the same URL with the same cookies is a loop")
    func cookieGate() throws {
        let url = "http://h.example/f"
        var chain = RedirectChain(request: first(url, headers: [:]), maximum: 10)
        guard case .follow(let next) = redirect(&chain, from: url, to: url, setCookie: "gate=open; Path=/") else {
            Issue.record("the gate was refused")
            return
        }
        #expect(next.value(forHTTPHeaderField: "Cookie") == "gate=open")
        guard case .refuse(let error) = redirect(&chain, from: url, to: url) else {
            Issue.record("a loop was followed")
            return
        }
        #expect(error == .tooManyRedirects && error.reason.contains("loop"))
    }

    @Test("More than the limit is refused")
    func limit() {
        var chain = RedirectChain(request: first("http://h.example/0", headers: [:]), maximum: 3)
        for hop in 1...3 {
            guard case .follow = redirect(&chain, from: "http://h.example/\(hop - 1)", to: "http://h.example/\(hop)")
            else {
                Issue.record("hop \(hop) refused")
                return
            }
        }
        guard case .refuse(let error) = redirect(&chain, from: "http://h.example/3", to: "http://h.example/4") else {
            Issue.record("the fourth redirect was followed")
            return
        }
        #expect(error.reason.contains("more than 3"))
    }

    @Test("The caller's credentials and cookie go to the original origin only; the chain's cookies never cross hosts")
    func credentials() {
        let headers = ["Authorization": "Basic c2VjcmV0", "Cookie": "session=caller", "X-Other": "kept"]
        var chain = RedirectChain(request: first("http://a.example/f", headers: headers), maximum: 10)
        guard
            case .follow(let away) = redirect(
                &chain, from: "http://a.example/f", to: "http://b.example/f", setCookie: "a=1; Path=/",
                headers: headers)
        else {
            Issue.record("refused")
            return
        }
        #expect(away.value(forHTTPHeaderField: "Authorization") == nil)
        #expect(away.value(forHTTPHeaderField: "Cookie") == nil, "neither the caller's nor a.example's cookie")
        #expect(away.value(forHTTPHeaderField: "X-Other") == "kept")
        guard
            case .follow(let back) = redirect(
                &chain, from: "http://b.example/f", to: "http://a.example/g", headers: headers)
        else {
            Issue.record("refused")
            return
        }
        #expect(back.value(forHTTPHeaderField: "Authorization") == "Basic c2VjcmV0")
        #expect(back.value(forHTTPHeaderField: "Cookie") == "session=caller; a=1", "each once")
    }

    @Test("Seeded random chains: nothing of one host's reaches another, and the chain always ends")
    func randomChains() {
        let seed = UInt64(ProcessInfo.processInfo.environment["DOWNLOADER_REDIRECT_SEED"] ?? "") ?? 36
        var random = SeededGenerator(seed: seed)
        let hosts = ["a.example", "b.example", "cdn.a.example", "c.example:8080"]
        for trial in 0..<500 {
            let maximum = Int.random(in: 0...6, using: &random)
            let headers = ["Authorization": "Basic eA==", "Cookie": "caller=1"]
            var current = "http://a.example/p0"
            var chain = RedirectChain(request: first(current, headers: headers), maximum: maximum)
            var followed = 0
            var setBy: [String: String] = [:]  // cookie name → host that set it (host-only cookies)
            for step in 0..<20 {
                let target = "http://\(hosts.randomElement(using: &random)!)/p\(Int.random(in: 0...2, using: &random))"
                let name = "k\(step)"
                let sets = Bool.random(using: &random)
                let host = URL(string: current)!.host!
                if sets { setBy[name] = host }
                let decision = redirect(
                    &chain, from: current, to: target, setCookie: sets ? "\(name)=v; Path=/" : nil, headers: headers)
                guard case .follow(let next) = decision else { break }
                followed += 1
                let targetHost = URL(string: target)!.host!
                let sent = (next.value(forHTTPHeaderField: "Cookie") ?? "").split(separator: ";").map {
                    $0.trimmingCharacters(in: .whitespaces)
                }
                let original = RedirectChain.isSameOrigin(URL(string: target)!, URL(string: "http://a.example/")!)
                #expect(
                    (next.value(forHTTPHeaderField: "Authorization") != nil) == original,
                    "seed \(seed) trial \(trial): credentials on \(target)")
                #expect(sent.contains("caller=1") == original, "seed \(seed) trial \(trial): caller cookie")
                for cookie in sent where cookie != "caller=1" {
                    let cookieName = String(cookie.prefix { $0 != "=" })
                    #expect(setBy[cookieName] == targetHost, "seed \(seed) trial \(trial): \(cookie) to \(targetHost)")
                }
                #expect(Set(sent).count == sent.count, "seed \(seed) trial \(trial): a cookie twice")
                current = target
            }
            #expect(followed <= maximum, "seed \(seed) trial \(trial)")
        }
    }
}
