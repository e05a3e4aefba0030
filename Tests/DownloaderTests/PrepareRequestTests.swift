import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Issue #25: `Configuration.prepareRequest` sees every request of every download, and `Configuration.userAgent`.
@Suite("Configuration.prepareRequest and userAgent")
final class PrepareRequestTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }

    init() throws {
        workspace = try TestWorkspace()
    }

    /// A manager whose hook numbers every request in `X-Token` (a token that changes each time) and counts them.
    func makeManager(
        window: Int = 64 << 10, connections: Int = 1, calls: Locked<Int>,
        hook: (@Sendable (URLRequest) async throws -> URLRequest)? = nil
    ) throws -> DownloadManager {
        var configuration = DownloadManager.Configuration.forTests(directory: workspace.directory, window: window)
        configuration.connectionsPerDownload = connections
        configuration.minimumSegmentSize = 256 << 10
        configuration.prepareRequest =
            hook ?? { request in
                var request = request
                let number = calls.withLock { calls -> Int in
                    calls += 1
                    return calls
                }
                request.setValue("token-\(number)", forHTTPHeaderField: "X-Token")
                return request
            }
        return try DownloadManager(configuration: configuration)
    }

    func requests(_ name: String) -> [RecordedRequest] {
        server.requests.filter { $0.path == "/bytes/\(name)" }
    }

    @Test("Called before every window, every retry and a resume's HEAD: each request carries a fresh token")
    func everyRequest() async throws {
        let calls = Locked(0)
        let manager = try makeManager(calls: calls)
        // 300 KB in 64 KiB windows, the connection dropped once at 150 KB (a retry by Range).
        let url = server.url("/bytes/tokens?size=300000&dropAt=150000")
        let receipt = try await manager.download(url)
        #expect(receipt.md5 == TestContent(name: "tokens", size: 300_000).md5.hexString)
        var seen = requests("tokens")
        // Windows grow when the disk keeps up (WindowSizing), so their count depends on the machine's pace; what does
        // not: a window before the drop, the one it cut, and a retry from where it cut (not a window's edge).
        #expect(seen.count >= 3, "windows and a retry: \(seen.map(\.range))")
        #expect(seen.contains { ($0.rangeStart ?? 0) % (64 << 10) != 0 }, "a retry: \(seen.map(\.range))")
        #expect(seen.count == calls.withLock { $0 }, "one call per request")
        #expect(Set(seen.compactMap { $0.value(forHeader: "X-Token") }).count == seen.count, "a fresh token each")
        await manager.shutdown()

        // A resume asks HEAD first: it goes through the hook as well.
        let resumed = Locked(0)
        let second = try makeManager(calls: resumed)
        let slow = server.url("/bytes/headed?size=2000000&rate=2000000")
        await second.enqueue(slow)
        // A few windows in, so that a state is saved.
        #expect(await server.waitUntil { $0.requests.filter { $0.path == "/bytes/headed" }.count >= 4 })
        await second.suspend(slow)
        await second.shutdown()
        let third = try makeManager(calls: resumed)
        _ = try await third.download(slow)
        seen = requests("headed")
        #expect(
            seen.contains { $0.method == "HEAD" && $0.value(forHeader: "X-Token") != nil },
            "\(seen.map { "\($0.method) \($0.range ?? "-")" })")
        #expect(seen.allSatisfy { $0.value(forHeader: "X-Token") != nil })
        await third.shutdown()
    }

    @Test("Called before every segment of a download over several connections")
    func everySegment() async throws {
        let calls = Locked(0)
        let manager = try makeManager(window: 256 << 10, connections: 4, calls: calls)
        // After the first window, responses wait until two segments have arrived: several connections at once.
        let url = server.url("/bytes/segments?size=\(2 << 20)&gate=s&gateSize=2&gateFrom=\(64 << 10)")
        let receipt = try await manager.download(url)
        #expect(receipt.md5 == TestContent(name: "segments", size: 2 << 20).md5.hexString)
        let seen = requests("segments")
        #expect(server.statistics.peakActiveRequests > 1, "several connections at once")
        #expect(seen.count == calls.withLock { $0 } && seen.allSatisfy { $0.value(forHeader: "X-Token") != nil })
        await manager.shutdown()
    }

    @Test("A URL signed again for each request: the download completes, and its identity stays the URL asked for")
    func resigned() async throws {
        let calls = Locked(0)
        let manager = try makeManager(calls: calls) { request in
            var components = URLComponents(url: request.url!, resolvingAgainstBaseURL: false)!
            let number = calls.withLock { calls -> Int in
                calls += 1
                return calls
            }
            components.queryItems = (components.queryItems ?? []) + [URLQueryItem(name: "sig", value: "\(number)")]
            var signed = request
            signed.url = components.url
            return signed
        }
        let url = server.url("/bytes/signed?size=300000")
        let receipt = try await manager.download(url)
        #expect(receipt.url == url && receipt.md5 == TestContent(name: "signed", size: 300_000).md5.hexString)
        let queries = requests("signed").map(\.target)
        #expect(queries.count == calls.withLock { $0 } && queries.allSatisfy { $0.contains("sig=") }, "\(queries)")
        await manager.shutdown()
    }

    struct Expired: Error {}

    @Test("A throw fails the download at once with the error, and nothing reaches the server; a DownloadError passes")
    func throwing() async throws {
        let calls = Locked(0)
        let manager = try makeManager(calls: calls) { _ in
            calls.withLock { $0 += 1 }
            throw Expired()
        }
        let url = server.url("/bytes/refused?size=1000")
        do {
            _ = try await manager.download(url)
            Issue.record("expected a failure")
        } catch DownloadError.requestPreparationFailed {
            let receipt = await manager.receipt(for: url)
            #expect(receipt?.state == .failed)
            #expect(receipt?.error?.underlyingError is Expired)
        }
        #expect(calls.withLock { $0 } == 1, "not retried")
        #expect(requests("refused").isEmpty)
        await manager.shutdown()

        let passing = try makeManager(calls: calls) { request in
            throw DownloadError.httpStatus(401, url: request.url!)
        }
        await #expect(throws: DownloadError.httpStatus) { try await passing.download(url) }
        await passing.shutdown()
    }

    @Test("User-Agent: Downloader/VERSION by default; the configuration's, or a download's header, wins")
    func userAgent() async throws {
        var configuration = DownloadManager.Configuration.forTests(directory: workspace.directory)
        #expect(configuration.userAgent == "Downloader/\(DownloadManager.version)")
        let manager = try DownloadManager(configuration: configuration)
        _ = try await manager.download(server.url("/bytes/ua1?size=1000"))
        var options = DownloadOptions()
        options.headers["User-Agent"] = "mine/2"
        _ = try await manager.download(server.url("/bytes/ua2?size=1000"), options: options)
        await manager.shutdown()
        configuration.userAgent = "service/3"
        let other = try DownloadManager(configuration: configuration)
        _ = try await other.download(server.url("/bytes/ua3?size=1000"))
        await other.shutdown()
        #expect(requests("ua1").allSatisfy { $0.value(forHeader: "User-Agent") == "Downloader/1.0.0" })
        #expect(requests("ua2").allSatisfy { $0.value(forHeader: "User-Agent") == "mine/2" })
        #expect(requests("ua3").allSatisfy { $0.value(forHeader: "User-Agent") == "service/3" })
        #expect(!requests("ua1").isEmpty && !requests("ua2").isEmpty && !requests("ua3").isEmpty)
    }
}
