import Foundation

/// One header line as the client sent it.
public struct HeaderField: Sendable, Hashable {
    public let name: String
    public let value: String
}

/// A request the server received, kept so that tests can assert what a client really sent.
public struct RecordedRequest: Sendable {
    /// The order in which the server received it (0, 1, 2, …).
    public let index: Int
    /// Which connection it arrived on (connections are numbered from 0 in accept order).
    public let connectionID: Int
    /// `GET`, `HEAD`, …
    public let method: String
    /// The request target as sent: path and query.
    public let target: String
    /// The header lines, in order.
    public let headers: [HeaderField]
    /// When the server read its head (for a failing test's timeline; never for synchronisation).
    public var received: ContinuousClock.Instant = .now

    /// The path part of the target, without the query.
    public var path: String {
        String(target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
    }

    /// The first value of a header, matched case-insensitively.
    public func value(forHeader name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// The `Range` header, if any.
    public var range: String? { value(forHeader: "Range") }

    /// The first byte asked for by a `Range: bytes=N-…` header, if any.
    public var rangeStart: Int? {
        guard let range, range.hasPrefix("bytes="), !range.contains(",") else { return nil }
        let spec = range.dropFirst("bytes=".count)
        guard let dash = spec.firstIndex(of: "-"), dash != spec.startIndex else { return nil }
        return Int(spec[..<dash])
    }
}

/// What the server has observed so far; the argument of `HTTPTestServer.waitUntil`.
public struct ServerStatistics: Sendable {
    /// Every request received, in order.
    public internal(set) var requests: [RecordedRequest] = []
    /// Connections open now.
    public internal(set) var openConnections = 0
    /// The most connections open at once.
    public internal(set) var peakConnections = 0
    /// Requests being answered now (from the end of the request head to the end of the response).
    public internal(set) var activeRequests = 0
    /// The most requests being answered at once: the client's real transfer concurrency, unlike open connections,
    /// which include idle keep-alive ones.
    public internal(set) var peakActiveRequests = 0
    /// Response body bytes written to sockets, over all requests.
    public internal(set) var bodyBytesSent: Int64 = 0
    /// Connections accepted in all.
    public internal(set) var connectionsAccepted = 0
    /// Responses that reached their `stallAfter` and paused, in all.
    public internal(set) var stallsBegun = 0
    /// Requests answered `503` at once because more than `busyAbove` were being answered, in all.
    public internal(set) var refusedRequests = 0

    /// The requests whose path (without query) is `path`.
    public func requests(path: String) -> [RecordedRequest] {
        requests.filter { $0.path == path }
    }
}
