import Aria2RPC
import Downloader
import Foundation
import HTTPTypes
import Hummingbird

/// `/api/downloads?offset=N&limit=M`: one page of the downloads as JSON rows, in the order they were added, with
/// `X-Total-Count` and, when there are more, a `Link` to the next page. `limit` is 1,000 when not given, at most
/// 10,000: a list of 100,000 downloads is never built into one answer.
enum DownloadsPage {
    /// One row: the download's aria2 GID beside its snapshot.
    struct Row: Encodable {
        let gid: String
        let download: DownloadSnapshot
    }

    static let defaultLimit = 1_000
    static let maximumLimit = 10_000

    /// The page `request` asks for.
    static func response(for request: Request, manager: DownloadManager) async throws -> Response {
        let query = request.uri.queryParameters
        let offset = query["offset"].flatMap { Int($0) } ?? 0
        let limit = query["limit"].flatMap { Int($0) } ?? defaultLimit
        guard offset >= 0, (1...maximumLimit).contains(limit) else {
            return Response(status: .badRequest)
        }
        var rows: [Row] = []
        var seen = 0
        var cursor: DownloadManager.ReceiptCursor?
        repeat {
            let page = await manager.receipts(after: cursor, limit: 500)
            for receipt in page.receipts {
                defer { seen += 1 }
                guard seen >= offset, rows.count < limit else { continue }
                // Removed since the page was read (the page's own polling beside a remove): skipped.
                guard let snapshot = await manager.snapshot(for: receipt.url) else { continue }
                rows.append(Row(gid: Aria2Session.gid(of: receipt), download: snapshot))
            }
            cursor = page.next
        } while cursor != nil
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var response = json(try encoder.encode(rows))
        response.headers[HTTPField.Name("X-Total-Count")!] = String(seen)
        if offset + limit < seen {
            response.headers[HTTPField.Name("Link")!] =
                "</api/downloads?offset=\(offset + limit)&limit=\(limit)>; rel=\"next\""
        }
        return response
    }
}
