import Aria2RPC
import Downloader
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import HummingbirdWSTesting
import HummingbirdWebSocket
import Logging
import Prometheus
import Synchronization
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

    /// The service's routes over this test's session, as `buildApplication` makes them.
    func application(
        host: String = "127.0.0.1", secret: String? = nil, allowsEveryOrigin: Bool = false, limit: Int = 2 << 20,
        session: Aria2Session? = nil, firstRequestDeadline: Duration = .seconds(10)
    ) -> some ApplicationProtocol {
        var options = ServerOptions()
        options.host = host
        options.port = 0
        options.directory = directory
        options.secret = secret
        options.allowsEveryOrigin = allowsEveryOrigin
        options.maximumRequestSize = limit
        options.firstRequestDeadline = firstRequestDeadline
        let session = session ?? self.session
        return makeApplication(
            router: buildRouter(
                session: session, options: options, metrics: ServerMetrics(registry: PrometheusCollectorRegistry()),
                logger: Logger(label: "routes-tests")),
            webSocketRouter: buildWebSocketRouter(session: session, options: options), options: options,
            logger: Logger(label: "routes-tests"))
    }

    @Test("On a loopback bind, a Host that is not a loopback name is refused (DNS rebinding), with its Origin or not")
    func rebinding() {
        let loopback = OriginGuard<BasicWebSocketRequestContext>.allowedHosts(boundTo: "127.0.0.1")
        for (host, origin, served) in [
            ("127.0.0.1:6800", nil, true),
            ("localhost:6800", "http://localhost:6800", true),
            ("[::1]:6800", nil, true),
            ("LOCALHOST", nil, true),
            ("evil.example:6800", "http://evil.example:6800", false),
            ("evil.example", nil, false),
            ("127.0.0.1:6800", "http://evil.example", false),
            ("localhost:6800", "ws://localhost", true),  // a WebSocket library's own, never a browser page's
            ("evil.example:6800", "ws://evil.example", false),
        ] as [(String, String?, Bool)] {
            let refusal = OriginGuard<BasicWebSocketRequestContext>.refusal(
                host: host, origin: origin, allowedHosts: loopback, allowsEveryOrigin: false)
            #expect((refusal == nil) == served, "Host \(host), Origin \(origin ?? "none"): \(refusal ?? "served")")
        }
        #expect(
            OriginGuard<BasicWebSocketRequestContext>.allowedHosts(boundTo: "0.0.0.0") == nil,
            "any name on another bind")
        #expect(
            OriginGuard<BasicWebSocketRequestContext>.allowedHosts(boundTo: "127.0.0.5")?.contains("127.0.0.5") == true)
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

    /// Adds `count` downloads of a closed port, suspended at once.
    func addSuspended(_ count: Int, named name: String) async {
        for index in 0..<count {
            let url = URL(string: "http://127.0.0.1:1/\(name)-\(index).bin")!
            await manager.enqueue(url)
            await manager.suspend(url)
        }
    }

    @Test("With a secret, /api/downloads and /metrics need its bearer token; /healthz never does")
    func bearer() async throws {
        try await application(secret: "t0ken").test(.router) { client in
            for uri in ["/api/downloads", "/metrics"] {
                #expect(try await client.execute(uri: uri, method: .get).status == .unauthorized)
                let wrong = try await client.execute(uri: uri, method: .get, headers: [.authorization: "Bearer nope"])
                #expect(wrong.status == .unauthorized)
                let right = try await client.execute(uri: uri, method: .get, headers: [.authorization: "Bearer t0ken"])
                #expect(right.status == .ok, "\(uri)")
            }
            let health = try await client.execute(uri: "/healthz", method: .get)
            #expect(health.status == .ok && String(buffer: health.body).contains(#""status":"ok""#))
        }
    }

    @Test("/metrics counts the downloads by state in Prometheus' text, with the downloader_ prefix")
    func metrics() async throws {
        await addSuspended(3, named: "metric")
        _ = await session.reply(
            to: Data(#"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":["token:x"]}"#.utf8))
        let secured = try await Fixture(name: "metrics-secret", secret: "s")
        defer { secured.remove() }
        _ = await secured.session.reply(to: Data(#"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion"}"#.utf8))
        try await application().test(.router) { client in
            let text = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(text.contains(#"downloader_downloads{state="suspended"} 3"#), "\(text)")
            #expect(text.contains(#"downloader_downloads{state="completed"} 0"#))
            #expect(text.contains("# TYPE downloader_written_bytes gauge"))
            #expect(text.contains("downloader_max_concurrent_downloads 4"))
        }
        try await application(session: secured.session).test(.router) { client in
            let text = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(text.contains("downloader_rpc_authentication_failures_total 1"), "\(text)")
        }
    }

    @Test("/api/downloads is paged: offset and limit, X-Total-Count, a Link to the next page")
    func paging() async throws {
        await addSuspended(25, named: "page")
        try await application().test(.router) { client in
            let first = try await client.execute(uri: "/api/downloads?limit=10", method: .get)
            let rows = try JSONSerialization.jsonObject(with: Data(first.body.readableBytesView)) as? [[String: Any]]
            #expect(rows?.count == 10)
            #expect(first.headers[HTTPField.Name("X-Total-Count")!] == "25")
            #expect(first.headers[HTTPField.Name("Link")!] == #"</api/downloads?offset=10&limit=10>; rel="next""#)
            let last = try await client.execute(uri: "/api/downloads?offset=20&limit=10", method: .get)
            let lastRows = try JSONSerialization.jsonObject(with: Data(last.body.readableBytesView)) as? [Any]
            #expect(lastRows?.count == 5 && last.headers[HTTPField.Name("Link")!] == nil)
            #expect(try await client.execute(uri: "/api/downloads?limit=0", method: .get).status == .badRequest)
        }
    }

    @Test("POST /jsonrpc: aria2c's statuses, and a body over the limit refused with 413 before it is read")
    func postStatuses() async throws {
        try await application(limit: 4096).test(.router) { client in
            let large =
                #"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":[""#
                + String(repeating: "x", count: 5000) + #""]}"#
            for (body, expected) in [
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion"}"#, HTTPResponse.Status.ok),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.tellStatus","params":["zz"]}"#, .badRequest),
                (#"{"jsonrpc":"2.0","id":1,"method":"aria2.none"}"#, .notFound),
                ("{nope", .internalServerError),
                (large, .contentTooLarge),
            ] {
                let response = try await client.execute(uri: "/jsonrpc", method: .post, body: ByteBuffer(string: body))
                #expect(response.status == expected, "\(body.prefix(80))")
            }
        }
    }

    @Test("GET /jsonrpc as aria2 takes it; refused from another site's page, and JSONP only when every origin may call")
    func getRequests() async throws {
        let params = Data(#"["http://127.0.0.1:1/never.bin"]"#.utf8).base64EncodedString()
        let manager = self.manager
        try await application().test(.router) { client in
            let version = try await client.execute(uri: "/jsonrpc?method=aria2.getVersion&id=3", method: .get)
            #expect(version.status == .ok && String(buffer: version.body).contains(#""id":"3""#))
            // An <img> on another site: the browser says so; nothing is added.
            let forged = try await client.execute(
                uri: "/jsonrpc?method=aria2.addUri&id=1&params=\(params)", method: .get,
                headers: [HTTPField.Name("Sec-Fetch-Site")!: "cross-site"])
            #expect(forged.status == .forbidden)
            #expect(await manager.allReceipts.isEmpty)
            let jsonp = try await client.execute(
                uri: "/jsonrpc?method=aria2.getVersion&id=1&jsoncallback=cb", method: .get)
            #expect(jsonp.status == .forbidden)
        }
        try await application(allowsEveryOrigin: true).test(.router) { client in
            let jsonp = try await client.execute(
                uri: "/jsonrpc?method=aria2.getVersion&id=1&jsoncallback=cb", method: .get)
            #expect(jsonp.status == .ok && String(buffer: jsonp.body).hasPrefix("cb({"))
            let hostile = try await client.execute(
                uri: "/jsonrpc?method=aria2.getVersion&id=1&jsoncallback=alert(1)//", method: .get)
            #expect(hostile.status == .badRequest)
        }
    }

    @Test("WebSocket /jsonrpc: calls answered on the socket, and aria2's notifications pushed as downloads change")
    func webSocket() async throws {
        let url = "http://127.0.0.1:1/ws.bin"
        let gid = Aria2Session.gid(of: URL(string: url)!)
        let seen = Mutex<[String]>([])
        _ = try await application().test(.live) { client in
            try await client.ws("/jsonrpc") { inbound, outbound, _ in
                try await outbound.write(
                    .text(#"{"jsonrpc":"2.0","id":"a","method":"aria2.addUri","params":[["\#(url)"],{"pause":true}]}"#))
                var removed = false
                for try await message in inbound.messages(maxSize: 1 << 20) {
                    guard case .text(let text) = message else { continue }
                    seen.withLock { $0.append(text) }
                    if text.contains(#""id":"a""#), !removed {
                        removed = true
                        try await outbound.write(
                            .text(#"{"jsonrpc":"2.0","id":"r","method":"aria2.remove","params":["\#(gid)"]}"#))
                    }
                    if text.contains("aria2.onDownloadStop") { break }
                }
                try await outbound.close(.normalClosure, reason: nil)
            }
        }
        let texts = seen.withLock { $0 }
        #expect(texts.contains { $0.contains(#""id":"a""#) && $0.contains(gid) }, "\(texts)")
        #expect(texts.contains { $0.contains("aria2.onDownloadStop") && $0.contains(gid) }, "\(texts)")
    }

    @Test("A connection that sends nothing, or trickles its first header, is closed at the deadline (slowloris)")
    func firstRequestDeadline() async throws {
        // Before: behind the WebSocket-capable channel nothing timed out a connection until its first head arrived.
        _ = try await application(firstRequestDeadline: .seconds(1)).test(.live) { client in
            let port = try #require(client.port)
            let silent = try RawConnection(port: port)
            #expect(silent.readsEndOfStream(within: .seconds(60)), "a silent connection stays open")
            let trickling = try RawConnection(port: port)
            trickling.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
            let deadline = ContinuousClock.now + .seconds(60)
            var closed = false
            while !closed && ContinuousClock.now < deadline {
                closed = !trickling.send("X-Slow: 1\r\n") || trickling.readsEndOfStream(within: .milliseconds(100))
            }
            #expect(closed, "a trickling header keeps the connection")
            // A request sent whole is answered, and its connection then follows the idle timeout, not this one.
            let prompt = try RawConnection(port: port)
            prompt.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            #expect(prompt.reads("200 OK", within: .seconds(60)))
            try await Task.sleep(for: .seconds(2))  // past the first-request deadline: not a synchronisation
            #expect(prompt.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"))
            #expect(prompt.reads("200 OK", within: .seconds(60)), "the deadline closed a connection that had asked")
        }
    }
}
