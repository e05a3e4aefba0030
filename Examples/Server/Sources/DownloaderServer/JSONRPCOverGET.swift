import Aria2RPC
import Foundation
import HTTPTypes
import Hummingbird

/// aria2's JSON-RPC over GET: `/jsonrpc?method=M&id=I&params=BASE64` (the params array as base64 JSON; with
/// neither `method` nor `id`, `params` is a batch), and JSONP with `jsoncallback=NAME`.
///
/// A GET is what any web page can make a browser send (an `<img>` or `<script>` tag), without an `Origin`, so a
/// page of another site could add downloads through one: a GET a browser marks as another site's
/// (`Sec-Fetch-Site: cross-site` or `same-site`) is refused, and JSONP (whose answer another site's page can read)
/// is served only with `--rpc-allow-origin-all`. aria2c serves both to everyone.
enum JSONRPCOverGET {
    /// The response to a GET of `/jsonrpc`.
    static func respond(to request: Request, session: Aria2Session, allowsEveryOrigin: Bool) async throws -> Response {
        var query: [String: String] = [:]
        for (key, value) in request.uri.queryParameters { query[String(key)] = String(value) }
        if !allowsEveryOrigin {
            if let site = request.headers[.secFetchSite], site == "cross-site" || site == "same-site" {
                return refusal(.forbidden, "a GET from another site's page is refused")
            }
            if query["jsoncallback"] != nil {
                return refusal(.forbidden, "JSONP needs --rpc-allow-origin-all")
            }
        }
        guard let body = Aria2Session.request(fromQuery: query) else {
            return refusal(.badRequest, "params must be base64 of a JSON array")
        }
        guard let reply = await session.reply(to: body) else { return Response(status: .noContent) }
        guard let callback = query["jsoncallback"] else {
            return json(reply.body, status: .init(code: reply.httpStatus))
        }
        // A JavaScript name only: the callback is written into a script.
        guard !callback.isEmpty, callback.count <= 64,
            callback.unicodeScalars.allSatisfy({
                $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "_$.".unicodeScalars.contains($0))
            })
        else { return refusal(.badRequest, "jsoncallback must be a JavaScript name") }
        var script = ByteBuffer(string: callback + "(")
        script.writeBytes(reply.body)
        script.writeString(")")
        return Response(
            status: .init(code: reply.httpStatus), headers: [.contentType: "text/javascript"],
            body: .init(byteBuffer: script))
    }

    static func refusal(_ status: HTTPResponse.Status, _ reason: String) -> Response {
        Response(
            status: status, headers: [.contentType: "text/plain"],
            body: .init(byteBuffer: ByteBuffer(string: reason + "\n")))
    }
}

extension HTTPField.Name {
    /// `Sec-Fetch-Site`: which site a browser's request comes from (`same-origin`, `same-site`, `cross-site`, `none`).
    static var secFetchSite: Self { Self("Sec-Fetch-Site")! }
}
