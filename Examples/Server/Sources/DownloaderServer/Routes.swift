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

    static func router(session: Aria2Session, manager: DownloadManager) -> Router<BasicRequestContext> {
        let router = Router()
        // Web front-ends for aria2 are served from other origins (aria2's --rpc-allow-origin-all).
        router.add(middleware: CORSMiddleware(allowOrigin: .all, allowHeaders: [.contentType], allowMethods: [.post]))
        router.post("jsonrpc") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 4 << 20)
            guard let answer = await session.respond(to: Data(body.readableBytesView)) else {
                return Response(status: .noContent)  // notifications only: nothing to answer
            }
            return json(answer)
        }
        router.get("api/downloads") { _, _ -> Response in
            var rows: [Row] = []
            var cursor: DownloadManager.ReceiptCursor?
            repeat {
                let page = await manager.receipts(after: cursor, limit: 500)
                for receipt in page.receipts {
                    rows.append(
                        Row(gid: Aria2Session.gid(of: receipt), download: await manager.snapshot(for: receipt.url)!))
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
