import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

extension TransferTests {
    @Test("A slow first request on a new connection is cut short; the rest opens another with a short request")
    func slowFirstRequestIsCut() async throws {
        let size = 600_000
        // 100,000 bytes, then a pause: 50 ms after the first bytes the rate is at most 2 MB/s, so the 500,000 left
        // need at least a quarter of a second, more than the 0.1 s allowed, however late the judgement runs. (A
        // server paced by its clock catches up in bursts after a delay on a loaded machine: no steady rate is safe.)
        let budget = FirstRequestBudget(measuring: 50_000_000, remaining: 100_000_000)
        let result = try await Transfer(
            url: server.url("/bytes/slowcut?size=\(size)&stallAfter=100000&stall=60&stallCount=1"),
            options: DownloadOptions(),
            directory: directory, bridge: bridge, configuration: .init(firstRequestBudget: budget)
        ).run()
        #expect(result.md5 == TestContent(name: "slowcut", size: size).md5)
        let requests = gets("slowcut")
        try #require(requests.count == 3, "\(requests.map(\.range))")
        let cut = try #require(requests[1].rangeStart)
        #expect(requests[0].range == "bytes=0-8388607" && cut > 0 && cut < size - (16 << 10))
        #expect(requests[1].range == "bytes=\(cut)-\(cut + (16 << 10) - 1)")
        #expect(requests[2].range == "bytes=\(cut + (16 << 10))-\(size - 1)")
        #expect(requests[1].connectionID != requests[0].connectionID, "the cut closed the first connection")
    }
}

extension TransferTests {
    @Test("A first request whose body pauses is cut a quarter of a second in, not when the next bytes come")
    func pausedFirstRequestIsCutOnTime() async throws {
        let size = 600_000
        // 100,000 bytes at once, then nothing for a minute: without a timer nothing would judge the budget until the
        // pause ends (the spin would last the whole minute).
        let url = server.url("/bytes/burst?size=\(size)&stallAfter=100000&stall=60&stallCount=1")
        let transfer = Transfer(
            url: url, options: DownloadOptions(), directory: directory, bridge: bridge,
            configuration: .init(firstRequestBudget: FirstRequestBudget()))
        let task = Task { try await transfer.run() }
        #expect(await server.waitUntil(timeout: .seconds(120)) { $0.requests(path: "/bytes/burst").count >= 2 })
        let result = try await task.value
        #expect(result.md5 == TestContent(name: "burst", size: size).md5)
        let requests = gets("burst")
        try #require(requests.count == 3, "\(requests.map(\.range))")
        // Cut where the bytes had got to (all 100,000, or fewer on a slow machine); the rest starts short.
        let cut = try #require(requests[1].rangeStart)
        #expect(cut > 0 && cut <= 100_000 && requests[1].range == "bytes=\(cut)-\(cut + (16 << 10) - 1)")
        #expect(requests[1].connectionID != requests[0].connectionID, "a new connection")
    }
}
