import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Requests read one at a time, counting how many were read: the batch's intake, seen from the list's side.
struct CountedRequests: AsyncSequence, Sendable {
    let requests: [DownloadRequest]
    let taken = Locked(0)

    struct AsyncIterator: AsyncIteratorProtocol {
        let requests: [DownloadRequest]
        let taken: Locked<Int>
        var next = 0

        mutating func next() async -> DownloadRequest? {
            guard next < requests.count else { return nil }
            defer { next += 1 }
            taken.withLock { $0 += 1 }
            return requests[next]
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(requests: requests, taken: taken) }
    var count: Int { taken.withLock { $0 } }
}

@Suite("DownloadManager batches")
final class DownloadManagerBatchTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }

    init() throws {
        workspace = try TestWorkspace()
    }

    func makeManager(maximumActive: Int = 4) throws -> DownloadManager {
        try DownloadManager(
            configuration: .forTests(directory: workspace.directory, maximumActive: maximumActive))
    }

    func requests(_ prefix: String, count: Int, query: String = "") -> [DownloadRequest] {
        (0..<count).map { DownloadRequest(server.url("/bytes/\(prefix)\($0)?size=\(1000 + $0)\(query)")) }
    }

    @Test("Every request gets one outcome; completed downloads leave the manager, their files stay")
    func everyRequestOnce() async throws {
        let manager = try makeManager()
        let list = requests("e", count: 60)
        var delivered: [URL: DownloadReceipt] = [:]
        for await outcome in manager.download(list, maximumInFlight: 5) {
            #expect(delivered[outcome.request.url] == nil)
            delivered[outcome.request.url] = try outcome.result.get()
        }
        #expect(delivered.count == 60)
        for (index, request) in list.enumerated() {
            let receipt = try #require(delivered[request.url])
            #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "e\(index)", size: 1000 + index).md5)
        }
        #expect(await manager.allReceipts.isEmpty)  // forgotten: memory does not grow with the list
        await manager.shutdown()
    }

    @Test("A batch's finished download leaves the journal with its placement line, which forgets it: no removal line")
    func batchPlacementForgets() async throws {
        let manager = try makeManager()
        let list = requests("r", count: 12)
        var files: [URL: URL] = [:]
        for await outcome in manager.download(list) { files[outcome.request.url] = try outcome.result.get().fileURL }
        await manager.shutdown()  // every pending save written
        let journal = try String(
            contentsOf: workspace.directory.appendingPathComponent(".downloader/journal"), encoding: .utf8)
        for request in list {
            let lines = journal.split(separator: "\n").filter { $0.hasPrefix(request.url.absoluteString + "\t") }
            #expect(!lines.contains { $0.contains("{\"remove\"") }, "\(lines)")
            // The last line is the placement, and it says the download is forgotten once placed.
            let last = try #require(lines.last)
            #expect(last.contains("\"placement\"") && last.contains("\"forgetsWhenPlaced\":true"), "\(lines)")
        }
        // A restart does not bring them back, and deletes none of their files; one the user deleted meanwhile stays
        // forgotten too (it is not fetched again).
        try FileManager.default.removeItem(at: try #require(files[list[0].url]))
        let again = try makeManager()
        #expect(await again.allReceipts.isEmpty)
        for (index, request) in list.enumerated().dropFirst() {
            let file = try #require(files[request.url])
            #expect(try md5OfFile(file) == TestContent(name: "r\(index)", size: 1000 + index).md5)
        }
        await again.shutdown()
    }

    @available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)  // the asynchronous batch API
    @Test("The intake waits for outcomes to be taken: at most maximumInFlight requests are read ahead")
    func intakeIsBounded() async throws {
        let manager = try makeManager(maximumActive: 8)
        let stream = await manager.events()
        let list = CountedRequests(requests: requests("b", count: 20, query: "&gate=b&gateSize=1000"))
        let outcomes = manager.download(list, maximumInFlight: 3)
        // Three held by the server: no fourth request may be read while none has ended.
        #expect(await server.waitUntil { $0.requests.filter { $0.method == "GET" }.count >= 3 })
        #expect(list.count == 3)
        // Once they complete, still nothing more is read until the consumer takes an outcome.
        let completed = Task {
            var urls: Set<URL> = []
            for await case .stateChanged(let receipt) in stream where receipt.state == .completed {
                urls.insert(receipt.url)
                if urls.count == 3 { return true }
            }
            return false
        }
        server.openGate("b")
        #expect(await completed.value)
        #expect(list.count == 3)
        var count = 0
        for await outcome in outcomes {
            #expect((try? outcome.result.get()) != nil)
            count += 1
            #expect(list.count <= count + 3)
        }
        #expect(count == 20 && list.count == 20)
        await manager.shutdown()
    }

    @Test("A failed download is an outcome and stays known, so that it can be resumed")
    func failuresStay() async throws {
        let manager = try makeManager()
        let missing = DownloadRequest(server.url("/status/404"))
        let list = [missing] + requests("f", count: 3)
        var failures: [DownloadError] = []
        for await outcome in manager.download(list) {
            if case .failure(let error) = outcome.result { failures.append(error) }
        }
        #expect(failures.map(\.statusCode) == [404])
        #expect(await manager.allReceipts.map(\.url) == [missing.url])
        #expect(await manager.receipt(for: missing.url)?.state == .failed)
        await manager.shutdown()
    }

    @available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)  // the asynchronous batch API
    @Test("Leaving the loop early stops the intake and suspends the downloads in flight")
    func leavingSuspends() async throws {
        let manager = try makeManager()
        let stream = await manager.events()
        let held = requests("h", count: 2, query: "&gate=h&gateSize=1000")
        let list = CountedRequests(
            requests: [DownloadRequest(server.url("/bytes/quick?size=1000"))] + held
                + requests("later", count: 10))
        let suspended = Task {
            var urls: Set<URL> = []
            for await case .stateChanged(let receipt) in stream where receipt.state == .suspended {
                urls.insert(receipt.url)
                if urls.isSuperset(of: held.map(\.url)) { return true }
            }
            return false
        }
        for await outcome in manager.download(list, maximumInFlight: 3) {
            #expect(outcome.request.url == server.url("/bytes/quick?size=1000"))
            break
        }
        #expect(await suspended.value)
        for request in held { #expect(await manager.receipt(for: request.url)?.state == .suspended) }
        #expect(list.count <= 4)  // the credit of the outcome taken may have read one more
        await manager.shutdown()
    }

    @Test("The same list after a restart fetches no completed file again (a HEAD each at most)")
    func rerunFetchesNothingTwice() async throws {
        let list = requests("r", count: 12)
        func gets(_ request: DownloadRequest) -> Int {
            server.requests.filter { $0.method == "GET" && $0.target == request.url.relativeTarget }.count
        }
        var first: [Int] = []
        for round in 0..<2 {
            let manager = try makeManager()
            for await outcome in manager.download(list) { _ = try outcome.result.get() }
            await manager.shutdown()
            if round == 0 {
                // At least one GET each (more only if a request was retried, e.g. a stall on a loaded machine).
                first = list.map(gets)
                #expect(first.allSatisfy { $0 >= 1 })
            } else {
                #expect(list.map(gets) == first, "the rerun fetched a completed file again")
            }
        }
    }

    @Test("The same list after an interruption starts the files it lacks before asking about the finished ones")
    func rerunStartsNewWorkFirst() async throws {
        // Every HEAD (the question a finished file costs) is held until the test lets it go.
        let finished = requests("f", count: 6, query: "&headGate=held")
        let first = try makeManager(maximumActive: 2)
        for await outcome in first.download(finished) { _ = try outcome.result.get() }
        await first.shutdown()
        let getsBefore = server.requests.filter { $0.method == "GET" }.count

        let new = DownloadRequest(server.url("/bytes/new?size=3000"))
        let manager = try makeManager(maximumActive: 2)
        let outcomes = manager.download(finished + [new], maximumInFlight: 3)
        let collected = Task { await outcomes.reduce(into: [DownloadOutcome]()) { $0.append($1) } }
        let target = new.url.relativeTarget
        let newStarted = await server.waitUntil(timeout: .seconds(20)) { statistics in
            statistics.requests.contains { $0.method == "GET" && $0.target == target }
        }
        server.openGate("held")
        let results = await collected.value
        #expect(newStarted, "the new file waited behind the HEADs of finished ones")
        #expect(results.count == 7)
        for outcome in results { #expect((try? outcome.result.get()) != nil, "\(outcome.request.url)") }
        // The finished files were asked about (HEAD), not fetched: the one GET is the new file's.
        #expect(server.requests.filter { $0.method == "GET" }.count == getsBefore + 1)
        await manager.shutdown()
    }

    @Test("receipts(after:limit:) pages through a manager's downloads in request order")
    func pagedReceipts() async throws {
        let manager = try makeManager()
        let urls = (0..<23).map { server.url("/bytes/pg\($0)?size=1000") }
        for url in urls { await manager.enqueue(url) }
        var listed: [URL] = []
        var cursor: DownloadManager.ReceiptCursor?
        repeat {
            let page = await manager.receipts(after: cursor, limit: 10)
            #expect(page.receipts.count <= 10)
            listed += page.receipts.map(\.url)
            cursor = page.next
        } while cursor != nil
        #expect(listed == urls)
        #expect(await manager.allReceipts.map(\.url) == listed)
        await manager.shutdown()
    }
}

extension URL {
    /// The request target the server records: path and query.
    fileprivate var relativeTarget: String { path + (query.map { "?" + $0 } ?? "") }
}
