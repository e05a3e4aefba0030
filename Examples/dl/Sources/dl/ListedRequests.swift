import Downloader

/// The run's requests: the command line's, then the input file's as they are read; `onRead` hears how many were read
/// and when the last was.
struct ListedRequests: AsyncSequence, Sendable {
    let first: [DownloadRequest]
    let then: InputFeed.Requests?
    let onRead: @Sendable (_ count: Int, _ ended: Bool) -> Void

    struct AsyncIterator: AsyncIteratorProtocol {
        var first: IndexingIterator<[DownloadRequest]>
        var then: InputFeed.Requests.AsyncIterator?
        let onRead: @Sendable (Int, Bool) -> Void
        var count = 0

        mutating func next() async -> DownloadRequest? {
            var request = first.next()
            if request == nil { request = await then?.next() }
            if request != nil { count += 1 }
            onRead(count, request == nil)
            return request
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(first: first.makeIterator(), then: then?.makeAsyncIterator(), onRead: onRead)
    }
}
