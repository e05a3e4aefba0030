import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The sink of one window of a segment: the response must be a 206 for exactly the bytes asked, of the same version
/// (its validators unchanged, `If-Range` honoured); the body is written at its offsets.
///
/// Anything else ends the segmented download: a 200 (Range ignored, or `If-Range` failed because the resource
/// changed) and a different version restart the file on one connection, so a file is never spliced from two versions.
final class SegmentSink: TransferSink, @unchecked Sendable {
    private let pipeline: DiskPipeline
    private let range: Range<Int64>
    private let known: ResourceMetadata
    private let windowSize: Int64
    private var expectedBodyLength: Int64?
    /// Body bytes received by this request (sent to the disk).
    private(set) var received: Int64 = 0
    /// Opens when the disk has written the first half of this window.
    private(set) var halfway: DiskFence?

    /// Creates the sink of the window `range`.
    /// - Parameters:
    ///   - pipeline: the transfer's disk side.
    ///   - range: the bytes asked for.
    ///   - known: the version being fetched.
    ///   - windowSize: the transfer's window size (for the judge).
    init(pipeline: DiskPipeline, range: Range<Int64>, known: ResourceMetadata, windowSize: Int64) {
        self.pipeline = pipeline
        self.range = range
        self.known = known
        self.windowSize = windowSize
    }

    func receive(response: URLResponse) -> RequestEnd? {
        guard let http = response as? HTTPURLResponse else {
            return .failed(.invalidResponse(pipeline.url, reason: "not an HTTP response"))
        }
        let request = WindowRequest(
            start: range.lowerBound, end: range.upperBound - 1, ranged: true, resumeOffset: range.lowerBound,
            windowSize: windowSize)
        switch ResponseJudge.judge(http.head, request: request, known: known, url: pipeline.url) {
        case .end(let end):
            return end
        case .append(_, let bodyLength), .begin(_, let bodyLength, _):
            // The judge compared the version (`ResourceMetadata.compare`): a segment starts after byte 0.
            expectedBodyLength = bodyLength
            return pipeline.failure.map { .failed($0) }
        case .replace:
            return .restartFromZero(reason: "a segment was answered with the whole file (200)")
        }
    }

    func receive(data: Data) -> RequestEnd? {
        let count = Int64(data.count)
        if let expectedBodyLength, received + count > expectedBodyLength {
            return .failed(
                .invalidResponse(
                    pipeline.url, reason: "the server sent more than the \(expectedBodyLength) bytes it announced"))
        }
        if let failure = pipeline.send(.writeAt(data, offset: range.lowerBound + received)) { return .failed(failure) }
        received += count
        if halfway == nil, let expectedBodyLength, received >= expectedBodyLength / 2 { halfway = pipeline.fence() }
        return nil
    }

    func complete(error: (any Error)?) -> RequestEnd {
        if let failure = pipeline.failure { return .failed(failure) }
        let gotEverything = expectedBodyLength.map { received == $0 } ?? false
        if let error, !gotEverything {
            return .failed(TransportError.failure(error, url: pipeline.url))
        }
        if !gotEverything {
            return .failed(
                .connectionFailed(pipeline.url, reason: "a segment ended after \(received) of \(range.count) bytes"))
        }
        return .finished
    }
}
