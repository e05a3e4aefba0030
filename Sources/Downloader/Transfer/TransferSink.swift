import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How one HTTP request of a transfer ended.
enum RequestEnd: Sendable {
    /// The response was accepted and its body arrived whole.
    case finished
    /// The resource is a different version than the partial file: start again from byte 0.
    case restartFromZero(reason: String)
    /// 416: nothing to send from the requested offset; the complete length if the server said it.
    case unsatisfiable(completeLength: Int64?)
    /// The request failed or its response was rejected.
    case failed(DownloadError)
    /// Closed from outside: pause, cancellation or shutdown.
    case cancelled
    /// A response streaming the whole file got further ahead of the disk than memory allows, and the server honours
    /// Range: what arrived is kept, the rest is asked for in windows.
    case diskBehind
    /// A run's first request on a new connection would have spun a core for long (`FirstRequestBudget`): what arrived
    /// is kept, and the rest continues on a new connection whose first request is short.
    case cutShort
    /// Ranges of this resource cannot be used (a 206 with a `Content-Encoding`, which URLSession decodes, or a 416
    /// for bytes the resource has): fetch it whole, without `Range`, for the rest of the download.
    case wholeWithoutRanges(reason: String)
    /// A continuation came with another ETag but the same length (and Last-Modified, where sent): backends that
    /// disagree on ETags for the same bytes. The ETag is ignored from now on, and continuations compare the bytes
    /// before the resume point instead.
    case unreliableETag(reason: String)
}

/// Receives one request's events. Every method is called on the session's serial delegate queue, never after the
/// request was closed, so an implementation may keep unsynchronised state that only that queue touches while the
/// request runs. Work a sink hands elsewhere (the transfer's disk queues) is waited for by its owner after the
/// request ends, never on the delegate queue.
protocol TransferSink: AnyObject, Sendable {
    /// Validates the response synchronously (URLSession on Linux ignores the disposition).
    /// - Returns: `nil` to accept the body, or how the request ends (it is then closed and late data is dropped).
    func receive(response: URLResponse) -> RequestEnd?
    /// Consumes a chunk of the body.
    /// - Returns: `nil` to continue, or how the request ends.
    func receive(data: Data) -> RequestEnd?
    /// The request completed (with or without a transport error) and was not closed before.
    /// - Returns: how the request ends.
    func complete(error: (any Error)?) -> RequestEnd
    /// When, if ever, `check(now:)` must run although no event came (a monotonic time in nanoseconds); asked after
    /// each event, it answers a time once.
    func takeCheckTime() -> UInt64?
    /// The time from `takeCheckTime()` has come.
    /// - Returns: `nil` to continue, or how the request ends.
    func check(now: UInt64) -> RequestEnd?
    /// Whether body bytes that still arrive after the request was closed with `end` (URLSession delivers chunks
    /// already read after a cancel) go to the sink rather than being dropped: bytes that reached the process are then
    /// written, and never fetched a second time. Asked, like the rest, on the delegate queue, with an end this sink
    /// gave; a request closed from another thread (a cancel, the stall watchdog) keeps nothing.
    func keepsData(after end: RequestEnd) -> Bool
}

extension TransferSink {
    func takeCheckTime() -> UInt64? { nil }
    func check(now: UInt64) -> RequestEnd? { nil }
    func keepsData(after end: RequestEnd) -> Bool { false }
}
