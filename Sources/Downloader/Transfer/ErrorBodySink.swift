import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A sink in front of a request's own: when that one rejects the response with an HTTP error status, this one reads
/// the start of the body (up to `ErrorBody.maximumBytes`, for at most a second) and ends the request with the error
/// and what the server said (`ErrorBody.summary`). Every other event goes to the inner sink unchanged.
///
/// Like every sink it is called on the session's serial delegate queue only, so its state needs no lock.
final class ErrorBodySink: TransferSink, @unchecked Sendable {
    private let inner: any TransferSink
    /// The error the inner sink ended the request with, while its body is read.
    private var pending: DownloadError?
    private var body = Data()
    private var deadline: UInt64?

    init(_ inner: any TransferSink) {
        self.inner = inner
    }

    func receive(response: URLResponse) -> RequestEnd? {
        let end = inner.receive(response: response)
        guard case .failed(let error) = end, error == .httpStatus, (error.statusCode ?? 0) >= 400,
            (response as? HTTPURLResponse)?.expectedContentLength != 0
        else { return end }
        pending = error
        deadline = DispatchTime.now().uptimeNanoseconds + 1_000_000_000
        return nil
    }

    func receive(data: Data) -> RequestEnd? {
        guard pending != nil else { return inner.receive(data: data) }
        body.append(data.prefix(ErrorBody.maximumBytes - body.count))
        return body.count >= ErrorBody.maximumBytes ? failure() : nil
    }

    func complete(error: (any Error)?) -> RequestEnd {
        pending != nil ? failure() : inner.complete(error: error)
    }

    func takeCheckTime() -> UInt64? {
        guard pending != nil else { return inner.takeCheckTime() }
        defer { deadline = nil }
        return deadline
    }

    func check(now: UInt64) -> RequestEnd? {
        pending != nil ? failure() : inner.check(now: now)
    }

    func keepsData(after end: RequestEnd) -> Bool {
        pending != nil ? false : inner.keepsData(after: end)
    }

    /// The pending error with what the body said.
    private func failure() -> RequestEnd {
        guard let pending else { return .cancelled }
        guard let summary = ErrorBody.summary(of: body) else { return .failed(pending) }
        return .failed(pending.adding("it said: “\(summary)”"))
    }
}
