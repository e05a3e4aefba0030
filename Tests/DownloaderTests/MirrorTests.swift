import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Issue #25: `DownloadOptions.mirrors` — other URLs of the same file, on a second server (another origin).
@Suite("Mirrors")
final class MirrorTests: Sendable {
    let workspace: TestWorkspace
    let mirrorServer: HTTPTestServer
    var server: HTTPTestServer { workspace.server }

    init() throws {
        workspace = try TestWorkspace()
        mirrorServer = try HTTPTestServer()
    }

    deinit {
        mirrorServer.stopInBackground()
    }

    func makeManager(connections: Int = 1) throws -> DownloadManager {
        var configuration = DownloadManager.Configuration.forTests(directory: workspace.directory, retryLimit: 0)
        configuration.connectionsPerDownload = connections
        configuration.minimumSegmentSize = 256 << 10
        return try DownloadManager(configuration: configuration)
    }

    static func gets(_ server: HTTPTestServer, _ name: String) -> [RecordedRequest] {
        server.requests.filter { $0.method == "GET" && $0.path == "/bytes/\(name)" }
    }

    @Test("The URL fails (404, a refused connection): the mirror serves the file, and the identity stays the URL")
    func failover() async throws {
        let manager = try makeManager()
        let mirror = mirrorServer.url("/bytes/m1?size=300000")
        let warnings = await manager.events(for: server.url("/status/404"))
        let receipt = try await manager.download(server.url("/status/404"), options: DownloadOptions(mirrors: [mirror]))
        #expect(receipt.url == server.url("/status/404") && receipt.state == .completed)
        #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "m1", size: 300_000).md5)
        var warned = false
        for await event in warnings {
            if case .warning(_, let reason) = event, reason.contains("mirror") { warned = true }
        }
        #expect(warned, "the switch is reported")

        // Nothing listens on port 1 of the loopback: connection refused.
        let refused = URL(string: "http://127.0.0.1:1/m2.bin")!
        let second = try await manager.download(
            refused, options: DownloadOptions(mirrors: [mirrorServer.url("/bytes/m2?size=5000")]))
        #expect(try md5OfFile(second.fileURL) == TestContent(name: "m2", size: 5000).md5)
        #expect(second.fileURL.lastPathComponent == "m2.bin", "named after the URL, not the mirror")
        await manager.shutdown()
    }

    @Test("Dropped mid-file: the mirror continues by Range from where the URL stopped, proving the same version")
    func continuesByRange() async throws {
        let manager = try makeManager()
        let size = 2 << 20
        let url = server.url("/bytes/mid?size=\(size)&dropAt=\(1 << 20)&dropCount=99")
        let receipt = try await manager.download(
            url, options: DownloadOptions(mirrors: [mirrorServer.url("/bytes/mid?size=\(size)")]))
        #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "mid", size: size).md5)
        let fromMirror = Self.gets(mirrorServer, "mid")
        #expect((fromMirror.first?.rangeStart ?? 0) > 0, "not from byte 0: \(fromMirror.map(\.range))")
        #expect(fromMirror.first?.value(forHeader: "If-Range") != nil)
        await manager.shutdown()
    }

    @Test("A mirror with other validators joins the file only when a checksum will check it")
    func otherValidators() async throws {
        let size = 2 << 20
        let url = server.url("/bytes/other?size=\(size)&dropAt=\(1 << 20)&dropCount=99")
        let mirror = mirrorServer.url("/bytes/other?size=\(size)&etag=other")
        let manager = try makeManager()
        do {
            _ = try await manager.download(url, options: DownloadOptions(mirrors: [mirror]))
            Issue.record("a mirror that cannot prove the version is not used without a checksum")
        } catch let error as DownloadError {
            #expect(error == .invalidResponse && error.reason.contains("another version"), "\(error)")
        }
        let md5 = TestContent(name: "other", size: size).md5.hexString
        let receipt = try await manager.download(url, options: DownloadOptions(expectedMD5: md5, mirrors: [mirror]))
        #expect(receipt.md5 == md5 && receipt.verification == .checksum(Checksum(md5: md5)!))
        #expect(try md5OfFile(receipt.fileURL).hexString == md5)
        await manager.shutdown()
    }

    @Test("With several connections the segments go to the URL and the mirror at once")
    func segmentsOverMirrors() async throws {
        let manager = try makeManager(connections: 4)
        let size = 4 << 20
        // After the first window, each server holds its segments until two have arrived at it: both are used at once.
        let held = "gate=seg&gateSize=2&gateFrom=\(64 << 10)"
        let receipt = try await manager.download(
            server.url("/bytes/seg?size=\(size)&\(held)"),
            options: DownloadOptions(mirrors: [mirrorServer.url("/bytes/seg?size=\(size)&\(held)")]))
        #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "seg", size: size).md5)
        #expect(Self.gets(mirrorServer, "seg").count >= 2 && Self.gets(server, "seg").count >= 3)
        await manager.shutdown()
    }

    @Test("Mirrors are saved with the download: after a restart, a resume whose URL is gone goes on from the mirror")
    func savedAndResumed() async throws {
        let size = 3 << 20
        let gone = try HTTPTestServer()
        // The URL's second response stalls after 1 MiB: the download is in progress, with state saved, when suspended.
        let url = gone.url("/bytes/kept?size=\(size)&stallAfter=\(1 << 20)&stall=60")
        let mirror = mirrorServer.url("/bytes/kept?size=\(size)")
        let first = try makeManager()
        await first.enqueue(url, options: DownloadOptions(mirrors: [mirror]))
        #expect(await gone.waitUntil { $0.bodyBytesSent >= (1 << 20) + (64 << 10) })
        await first.suspend(url)
        await first.shutdown()
        gone.stop()
        let second = try makeManager()
        await second.resume(url)
        let receipt = try await second.download(url)
        #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "kept", size: size).md5)
        let resumed = mirrorServer.requests.filter { $0.path == "/bytes/kept" }
        #expect(
            resumed.first?.method == "HEAD" && (resumed.dropFirst().first?.rangeStart ?? 0) > 0,
            "\(resumed.map(\.range))")
        await second.shutdown()
    }
}
