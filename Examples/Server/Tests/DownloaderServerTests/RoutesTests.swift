import Aria2RPC
import Downloader
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

@testable import DownloaderServer

/// The routes through Hummingbird's test client (issue #50): the host and origin guard, and `/api/downloads` while
/// downloads are removed beside it. Downloads point at a closed loopback port: nothing leaves the machine.
@Suite("Routes")
final class RoutesTests {
    let fixture: Fixture
    let directory: URL
    let manager: DownloadManager
    let session: Aria2Session

    init() async throws {
        let fixture = try await Fixture(name: "routes-tests", secret: nil)
        (self.fixture, directory, manager, session) = (fixture, fixture.directory, fixture.manager, fixture.session)
    }

    deinit {
        fixture.remove()
    }

    func application(host: String = "127.0.0.1") -> some ApplicationProtocol {
        Application(
            router: Routes.router(
                session: session, manager: manager, secret: nil, allowsEveryOrigin: false, host: host))
    }

    @Test("On a loopback bind, a Host that is not a loopback name is refused (DNS rebinding), with its Origin or not")
    func rebinding() {
        let loopback = OriginGuard<BasicRequestContext>.allowedHosts(boundTo: "127.0.0.1")
        for (host, origin, served) in [
            ("127.0.0.1:6800", nil, true),
            ("localhost:6800", "http://localhost:6800", true),
            ("[::1]:6800", nil, true),
            ("LOCALHOST", nil, true),
            ("evil.example:6800", "http://evil.example:6800", false),
            ("evil.example", nil, false),
            ("127.0.0.1:6800", "http://evil.example", false),
        ] as [(String, String?, Bool)] {
            let refusal = OriginGuard<BasicRequestContext>.refusal(
                host: host, origin: origin, allowedHosts: loopback, allowsEveryOrigin: false)
            #expect((refusal == nil) == served, "Host \(host), Origin \(origin ?? "none"): \(refusal ?? "served")")
        }
        #expect(OriginGuard<BasicRequestContext>.allowedHosts(boundTo: "0.0.0.0") == nil, "any name on another bind")
        #expect(OriginGuard<BasicRequestContext>.allowedHosts(boundTo: "127.0.0.5")?.contains("127.0.0.5") == true)
    }

    @Test("The router refuses another page's Origin with 403 and serves its own")
    func originThroughTheRouter() async throws {
        try await application().test(.router) { client in
            // The router test client names the host "localhost".
            let own = try await client.execute(
                uri: "/api/downloads", method: .get, headers: [.origin: "http://localhost"])
            #expect(own.status == .ok)
            let other = try await client.execute(
                uri: "/api/downloads", method: .get, headers: [.origin: "http://evil.example"])
            #expect(other.status == .forbidden)
        }
    }

    @Test("/api/downloads while downloads are removed beside it: every answer is a list, never a crash")
    func listingUnderRemoval() async throws {
        let urls = (0..<300).map { URL(string: "http://127.0.0.1:1/churn-\($0).bin")! }
        for url in urls {
            await manager.enqueue(url)
            await manager.suspend(url)
        }
        let manager = self.manager
        try await application().test(.router) { client in
            let removing = Task {
                for url in urls { await manager.remove(url) }
            }
            var answers = 0
            while !removing.isCancelled {
                let response = try await client.execute(uri: "/api/downloads", method: .get)
                #expect(response.status == .ok)
                let rows = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [Any]
                #expect(rows != nil)
                answers += 1
                if await manager.allReceipts.isEmpty { break }
            }
            await removing.value
            #expect(answers >= 1)
        }
    }
}
