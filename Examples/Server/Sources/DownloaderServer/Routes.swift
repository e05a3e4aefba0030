import Aria2RPC
import Downloader
import Foundation
import Hummingbird

/// The service's HTTP face: aria2's JSON-RPC at `/jsonrpc`, the downloads as JSON at `/api/downloads`, and a page
/// that shows them at `/`.
enum Routes {
    /// One row of `/api/downloads`: the download's aria2 GID beside its snapshot.
    struct Row: Encodable {
        let gid: String
        let download: DownloadSnapshot
    }

    /// The routes.
    /// - Parameters:
    ///   - secret: the `--rpc-secret`: `/api/downloads` then needs it too (`Authorization: Bearer TOKEN`); the page
    ///     reads it from its address's fragment (`/#token=TOKEN`), which browsers never send to a server.
    ///   - allowsEveryOrigin: `--rpc-allow-origin-all`: web pages of every origin may call (CORS); otherwise a
    ///     request a page of another origin makes is refused.
    ///   - host: the address it listens on (`--host`): on a loopback bind, only loopback names and this one may be
    ///     named by a request's `Host` (DNS rebinding).
    static func router(
        session: Aria2Session, manager: DownloadManager, secret: String?, allowsEveryOrigin: Bool,
        host: String = "127.0.0.1"
    ) -> Router<BasicRequestContext> {
        let router = Router()
        let allowedHosts = OriginGuard<BasicRequestContext>.allowedHosts(boundTo: host)
        if allowsEveryOrigin {
            router.add(
                middleware: CORSMiddleware(
                    allowOrigin: .all, allowHeaders: [.contentType, .authorization], allowMethods: [.get, .post]))
        }
        router.add(middleware: OriginGuard(allowedHosts: allowedHosts, allowsEveryOrigin: allowsEveryOrigin))
        router.post("jsonrpc") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 4 << 20)
            guard let answer = await session.respond(to: Data(body.readableBytesView)) else {
                return Response(status: .noContent)  // notifications only: nothing to answer
            }
            return json(answer)
        }
        router.get("api/downloads") { request, _ -> Response in
            if let secret, request.headers[.authorization] != "Bearer \(secret)" {
                return Response(status: .unauthorized, headers: [.wwwAuthenticate: "Bearer"])
            }
            var rows: [Row] = []
            var cursor: DownloadManager.ReceiptCursor?
            repeat {
                let page = await manager.receipts(after: cursor, limit: 500)
                for receipt in page.receipts {
                    // Removed since the page was read (the page's own polling beside a remove): skipped.
                    guard let snapshot = await manager.snapshot(for: receipt.url) else { continue }
                    rows.append(Row(gid: Aria2Session.gid(of: receipt), download: snapshot))
                }
                cursor = page.next
            } while cursor != nil
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return json(try encoder.encode(rows))
        }
        router.get("/") { _, _ -> Response in
            Response(
                status: .ok, headers: [.contentType: "text/html; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: StatusPage.html)))
        }
        return router
    }

    static func json(_ data: Data) -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
