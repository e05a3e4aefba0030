/// A JSON-RPC error object: aria2 answers its own failures (an unknown GID, a wrong secret, a bad option) with code 1
/// and a sentence, and the protocol's failures with JSON-RPC 2.0's codes.
public struct Aria2Error: Error, Sendable, Hashable {
    public var code: Int
    public var message: String

    public init(code: Int, message: String) {
        self.code = code
        self.message = message
    }

    /// aria2's code for everything a method refuses.
    static func refused(_ message: String) -> Aria2Error { Aria2Error(code: 1, message: message) }

    static let unauthorized = refused("Unauthorized")
    static let parseError = Aria2Error(code: -32700, message: "Parse error.")
    static let invalidRequest = Aria2Error(code: -32600, message: "Invalid Request.")
    static func methodNotFound(_ name: String) -> Aria2Error {
        Aria2Error(code: -32601, message: "Method not found: \(name)")
    }
    static func invalidParams(_ message: String) -> Aria2Error { Aria2Error(code: -32602, message: message) }
    static func gidNotFound(_ gid: String) -> Aria2Error { refused("GID \(gid) is not found") }
}
