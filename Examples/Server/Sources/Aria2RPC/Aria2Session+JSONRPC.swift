import Downloader
import Foundation

extension Aria2Session {
    /// An answer to a JSON-RPC body and the HTTP status aria2 gives it.
    public struct Reply: Sendable {
        /// The response's bytes.
        public let body: Data
        /// 200, or for one request that failed what aria2c answers: 400 (a refusal, code 1, or an invalid request),
        /// 404 (an unknown method) or 500 (the others). A batch is 200 whatever its calls did.
        public let httpStatus: Int
    }

    /// Answers a JSON-RPC 2.0 body: one request or a batch. Notifications (no `id`) are run and get no answer.
    /// - Parameter body: the POSTed bytes.
    /// - Returns: the answer's bytes, `nil` when there is nothing to answer (only notifications).
    public func respond(to body: Data) async -> Data? {
        await reply(to: body)?.body
    }

    /// Answers a JSON-RPC 2.0 body with the HTTP status aria2c gives the answer.
    /// - Parameter body: the POSTed bytes (or a GET's query, decoded).
    /// - Returns: the answer, `nil` when there is nothing to answer (only notifications).
    public func reply(to body: Data) async -> Reply? {
        guard let parsed = try? JSONDecoder().decode(JSONValue.self, from: body) else {
            return Self.reply(Self.errorResponse(.parseError, id: .null))
        }
        if case .array(let batch) = parsed {
            guard !batch.isEmpty, batch.count <= Self.maximumCallsPerBatch else {
                return Self.reply(Self.errorResponse(.invalidRequest, id: .null))
            }
            var answers: [JSONValue] = []
            for request in batch {
                if let answer = await answer(request) { answers.append(answer) }
            }
            return answers.isEmpty ? nil : Reply(body: Self.encode(.array(answers)), httpStatus: 200)
        }
        return await answer(parsed).map(Self.reply)
    }

    /// A single answer and its status, as aria2c's `HttpServerBodyCommand` maps the error code.
    static func reply(_ answer: JSONValue) -> Reply {
        let status: Int
        switch answer.object?["error"]?.object?["code"]?.integer {
        case nil: status = 200
        case 1, -32600: status = 400
        case -32601: status = 404
        default: status = 500
        }
        return Reply(body: encode(answer), httpStatus: status)
    }

    /// The JSON-RPC request a GET carries in its query, as aria2 reads it: `method`, `id` (always a string) and
    /// `params` (base64 of the JSON array); with neither `method` nor `id`, `params` is a whole batch.
    /// - Parameter query: the query's items, decoded.
    /// - Returns: the request's bytes, `nil` when `params` is not base64.
    public static func request(fromQuery query: [String: String]) -> Data? {
        var params: Data?
        if let text = query["params"] {
            guard let decoded = Data(base64Encoded: text) else { return nil }
            params = decoded
        }
        guard query["method"] != nil || query["id"] != nil else { return params ?? Data() }
        var request: [String: JSONValue] = ["jsonrpc": "2.0"]
        if let method = query["method"] { request["method"] = .string(method) }
        if let id = query["id"] { request["id"] = .string(id) }
        if let params {
            guard let value = try? JSONDecoder().decode(JSONValue.self, from: params) else { return nil }
            request["params"] = value
        }
        return encode(.object(request))
    }

    /// The notification aria2 sends a WebSocket client for an event, or `nil` for events it does not announce.
    /// - Parameter event: one of the manager's events.
    /// - Returns: `{"jsonrpc":"2.0","method":"aria2.onDownload…","params":[{"gid":"…"}]}`.
    public static func notification(for event: DownloadEvent) -> Data? {
        let method: String
        let gid: String
        switch event {
        case .stateChanged(let receipt):
            gid = Self.gid(of: receipt)
            switch receipt.state {
            case .downloading: method = "aria2.onDownloadStart"
            case .suspended: method = "aria2.onDownloadPause"
            case .completed: method = "aria2.onDownloadComplete"
            case .failed: method = "aria2.onDownloadError"
            default: return nil
            }
        case .removed(let url):
            gid = Self.gid(of: url)
            method = "aria2.onDownloadStop"
        default: return nil
        }
        return encode(["jsonrpc": "2.0", "method": .string(method), "params": [["gid": .string(gid)]]])
    }

    /// One request's response object; `nil` for a notification.
    func answer(_ request: JSONValue) async -> JSONValue? {
        guard let fields = request.object, let method = fields["method"]?.string else {
            return Self.errorResponse(.invalidRequest, id: request.object?["id"] ?? .null)
        }
        let id = fields["id"]
        let params: [JSONValue]
        switch fields["params"] {
        case nil, .null?: params = []
        case .array(let values)?: params = values
        default: return Self.errorResponse(.invalidParams("params must be an array"), id: id ?? .null)
        }
        do {
            let result = try await call(method, params)
            guard let id else { return nil }
            return ["jsonrpc": "2.0", "id": id, "result": result]
        } catch {
            guard let id else { return nil }
            return Self.errorResponse(error, id: id)
        }
    }

    static func errorResponse(_ error: Aria2Error, id: JSONValue) -> JSONValue {
        ["jsonrpc": "2.0", "id": id, "error": fault(error)]
    }

    static func encode(_ value: JSONValue) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)) ?? Data(#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603}}"#.utf8)
    }
}
