import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Issue #24: within a run, windows go to where the URL redirected (one round trip per window instead of two), and
/// back to the URL itself when the target refuses or the file restarts.
extension TransferTests {
    func requests(_ path: String) -> [RecordedRequest] {
        server.requests.filter { $0.method == "GET" && $0.path == path }
    }

    @Test("After a redirect, the other windows go straight to the target")
    func windowsGoToTheTarget() async throws {
        let size = 3 << 20
        let result = try await transfer("/signed/bytes/cdn?size=\(size)", window: 1 << 20).run()
        #expect(try md5OfFile(result.fileURL) == TestContent(name: "cdn", size: size).md5)
        #expect(requests("/signed/bytes/cdn").count == 1, "the URL itself once")
        let windows = requests("/bytes/cdn")
        // At least two (more when the disk falls behind: windows grow only while it keeps up).
        #expect(windows.count >= 2 && windows.allSatisfy { $0.target.hasSuffix("sig=0") })
    }

    @Test("A target that refuses (an expired signature: 403) sends the next window back to the URL itself")
    func expiredTargetGoesBack() async throws {
        let size = 4 << 20
        let result = try await transfer("/signed/bytes/expiring?size=\(size)&sigUses=2", window: 1 << 20).run()
        #expect(try md5OfFile(result.fileURL) == TestContent(name: "expiring", size: size).md5)
        let signed = requests("/signed/bytes/expiring").count
        #expect(signed >= 2, "a fresh signature was fetched")
        #expect(Set(requests("/bytes/expiring").compactMap { $0.target.split(separator: "=").last }).count == signed)
    }

    @Test("Credentials set for the URL's host never go straight to a target on another host")
    func credentialsStayWithTheirOrigin() async throws {
        let size = 3 << 20
        let options = DownloadOptions(headers: ["Authorization": "Bearer secret", "X-Trace": "t1"])
        let result = try await transfer(
            "/redirect-host/bytes/elsewhere?size=\(size)", options: options, window: 1 << 20
        )
        .run()
        #expect(try md5OfFile(result.fileURL) == TestContent(name: "elsewhere", size: size).md5)
        let direct = requests("/bytes/elsewhere")
        #expect(direct.count >= 3)
        #expect(direct.allSatisfy { $0.value(forHeader: "Authorization") == nil })
        #expect(direct.allSatisfy { $0.value(forHeader: "X-Trace") == "t1" })
        #expect(requests("/redirect-host/bytes/elsewhere").count == 1)
    }
}

extension TransferTests {
    @Test(
        "A redirect to a scheme other than http or https fails clearly and requests nothing (issue #48)",
        arguments: [
            "file:///etc/passwd", "ftp://127.0.0.1/etc/passwd", "gopher://127.0.0.1/etc/passwd", "file:/etc/passwd",
        ])
    func redirectToOtherScheme(location: String) async throws {
        let escaped = location.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? location
        let result = await runTransfer(transfer("/goto?to=\(escaped)"))
        #expect(throws: DownloadError.unsupportedScheme) { try result.get() }
        if case .failure(let error) = result {
            #expect(error.reason.contains("redirect"), "\(error.reason)")
        }
        #expect(!server.requests.contains { $0.path.contains("passwd") }, "\(server.requests.map(\.target))")
    }
}

extension TransferTests {
    @Test("A cookie set on a 302 to the same URL is sent on the redirect: the gate opens, no redirect loop (#36)")
    func cookieGate() async throws {
        let size = 300_000
        let result = try await transfer("/bytes/gated?size=\(size)&cookieGate=g").run()
        #expect(result.md5 == TestContent(name: "gated", size: size).md5)
        let sent = server.requests.compactMap { $0.value(forHeader: "Cookie") }
        #expect(sent.contains { $0.contains("g=open") }, "\(server.requests.map(\.headers))")
    }
}

extension TransferTests {
    @Test("Authorization is dropped when a redirect changes host, and kept on the same host")
    func authorizationStripped() async throws {
        let options = DownloadOptions(headers: ["Authorization": "Bearer secret"])
        _ = try await transfer("/redirect-host/bytes/auth?size=100", options: options).run()
        let first = server.requests.first { $0.path == "/redirect-host/bytes/auth" }
        #expect(first?.value(forHeader: "Authorization") == "Bearer secret")
        #expect(gets("auth").allSatisfy { $0.value(forHeader: "Authorization") == nil })
        #expect(gets("auth").allSatisfy { $0.value(forHeader: "Host")?.hasPrefix("localhost") == true })

        _ = try await transfer("/redirect/1/bytes/auth2?size=100", options: options).run()
        #expect(gets("auth2").allSatisfy { $0.value(forHeader: "Authorization") == "Bearer secret" })
    }
}
