import Foundation

extension Aria2Session {
    /// Answers a JSON-RPC 2.0 body: one request or a batch. Notifications (no `id`) are run and get no answer.
    /// - Parameter body: the POSTed bytes.
    /// - Returns: the answer's bytes, `nil` when there is nothing to answer (only notifications).
    public func respond(to body: Data) async -> Data? {
        guard let parsed = try? JSONDecoder().decode(JSONValue.self, from: body) else {
            return Self.encode(Self.errorResponse(.parseError, id: .null))
        }
        if case .array(let batch) = parsed {
            guard !batch.isEmpty, batch.count <= Self.maximumCallsPerBatch else {
                return Self.encode(Self.errorResponse(.invalidRequest, id: .null))
            }
            var answers: [JSONValue] = []
            for request in batch {
                if let answer = await answer(request) { answers.append(answer) }
            }
            return answers.isEmpty ? nil : Self.encode(.array(answers))
        }
        return await answer(parsed).map(Self.encode)
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
