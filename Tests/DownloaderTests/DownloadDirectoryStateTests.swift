import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The manager's state on disk (issue #12): one owner per directory, files created private, records that cannot
/// point outside their areas, the old layout taken over, saves that cost one line, and credentials that stay home.
@Suite("The state directory")
final class DownloadDirectoryStateTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var temporary: TemporaryDirectory { TemporaryDirectory(existing: workspace.directory) }

    init() throws {
        workspace = try TestWorkspace()
    }

    func configuration(_ directory: URL? = nil) -> DownloadManager.Configuration {
        .forTests(directory: directory ?? temporary.url)
    }

    @Test("A second manager on the same directory fails at once with directoryLocked, or waits when asked")
    func oneOwner() async throws {
        let first = try DownloadManager(configuration: configuration())
        #expect(throws: DownloadError.directoryLocked) { try DownloadManager(configuration: self.configuration()) }
        // onThread: this initializer blocks its thread while it waits.
        try await handOver(from: first, name: "owned") { waiting in
            try await onThread { try DownloadManager(configuration: waiting) }
        }
    }

    /// Starts a second manager on `first`'s directory with a lock timeout of 300 s (a deadline: `first` lets go
    /// here), downloads with `first`, shuts it down, and checks that the second one took over its receipts.
    func handOver(
        from first: DownloadManager, name: String,
        opening open: @escaping @Sendable (DownloadManager.Configuration) async throws -> DownloadManager
    ) async throws {
        var patient = configuration()
        patient.directoryLockTimeout = 300
        let waiting = patient
        let second = Task { try await open(waiting) }
        let url = server.url("/bytes/\(name)?size=1000")
        _ = try await first.download(url)
        await first.shutdown()
        let manager = try await second.value
        #expect(await manager.receipt(for: url)?.state == .completed, "the next owner finds the first one's receipts")
        await manager.shutdown()
    }

    @Test("Whether a manager holds a folder: Darwin's flock probe agrees with Linux's /proc/locks (issue #53)")
    func lockProbe() async throws {
        let state = temporary.url.appendingPathComponent(".downloader")
        let lock = state.appendingPathComponent("lock")
        #expect(!DownloadManager.probeLock(lock), "no lock file: not held")
        let manager = try DownloadManager(configuration: configuration())
        #expect(DownloadManager.probeLock(lock), "held by a manager")
        #expect(DownloadManager.savedDownloads(in: state).inUse)
        await manager.shutdown()
        #expect(!DownloadManager.probeLock(lock), "given back at shutdown")
        #expect(!DownloadManager.savedDownloads(in: state).inUse)
        // The probe gives its shared lock back: a manager opens the folder right after.
        let next = try DownloadManager(configuration: configuration())
        await next.shutdown()
    }

    @Test(
        "make(configuration:) waits for the directory without a thread, gives up at its timeout, stops when cancelled")
    func makeWaitsWithoutAThread() async throws {
        let first = try DownloadManager(configuration: configuration())
        var brief = configuration()
        brief.directoryLockTimeout = 0.2
        await #expect(throws: DownloadError.directoryLocked) { try await DownloadManager.make(configuration: brief) }

        var forever = configuration()
        forever.directoryLockTimeout = .infinity
        let abandoned = forever
        let cancelled = Task { try await DownloadManager.make(configuration: abandoned) }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }

        try await handOver(from: first, name: "made") { try await DownloadManager.make(configuration: $0) }
    }

    @Test("State files and folders are private from the moment they exist, whatever the umask")
    func privateFromCreation() async throws {
        let old = umask(0)
        defer { umask(old) }
        let folder = StateFolder(url: temporary.url.appendingPathComponent("state"))
        try folder.write(Data("x".utf8), to: "atomic", in: .state)
        #expect(try mode(folder.url) == 0o700 && mode(folder.url(of: "atomic", in: .state)) == 0o600)

        let manager = try DownloadManager(configuration: configuration())
        let url = server.url("/bytes/private?size=2000000&stallAfter=1000000&stall=60&stallCount=1")
        await manager.enqueue(url, options: DownloadOptions(headers: ["Authorization": "Bearer secret"]))
        #expect(await server.waitUntil { $0.bodyBytesSent >= 1_000_000 })
        await manager.saveReceiptsNow()
        let state = temporary.url.appendingPathComponent(".downloader")
        #expect(try mode(state) == 0o700 && mode(state.appendingPathComponent("partial")) == 0o700)
        for name in ["journal", "lock", "partial/\(DownloadDirectory.key(for: url)).state"] {
            #expect(try mode(state.appendingPathComponent(name)) == 0o600, "\(name)")
        }
        await manager.shutdown()
    }

    func mode(_ url: URL) throws -> Int {
        var info = stat()
        guard stat(url.path, &info) == 0 else { throw POSIXError(.ENOENT) }
        return Int(info.st_mode & 0o777)
    }

    @Test("A record pointing outside its area is dropped and reported, and removeAll deletes nothing out there")
    func tamperedRecords() async throws {
        let outside = temporary.url.appendingPathComponent("precious.txt")
        try Data("keep me".utf8).write(to: outside)
        let state = temporary.url.appendingPathComponent(".downloader")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let lines = [
            "http://127.0.0.1:1/a\t"
                + #"{"put":{"url":"http://127.0.0.1:1/a","options":{},"state":"completed","filename":"../precious.txt","totalBytesExpected":7}}"#,
            "http://127.0.0.1:1/b\t"
                + #"{"put":{"url":"http://127.0.0.1:1/b","options":{},"state":"completed","filename":"/etc/passwd","totalBytesExpected":7}}"#,
            "http://127.0.0.1:1/c\t"
                + #"{"put":{"url":"http://127.0.0.1:1/c","options":{},"state":"downloading","placement":{"name":"../precious.txt","length":7}}}"#,
            "file:///etc/passwd\t" + #"{"put":{"url":"file:///etc/passwd","options":{},"state":"suspended"}}"#,
        ]
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: state.appendingPathComponent("journal"))
        let manager = try DownloadManager(configuration: configuration())
        #expect(manager.receiptsRecoveryError == .corruptReceipts)
        let reason = manager.receiptsRecoveryError?.reason ?? ""
        #expect(
            reason.contains("points outside") && reason.contains("placed outside") && reason.contains("not an http"))
        #expect(await manager.allReceipts.isEmpty)
        await manager.removeAll()
        await manager.waitUntilQuiet()
        #expect(try Data(contentsOf: outside) == Data("keep me".utf8))
        await manager.shutdown()
    }

    @Test("A directory written by the previous version is taken over: receipts, partial files and their hash state")
    func migration() async throws {
        let done = server.url("/bytes/old-done?size=3000")
        let half = server.url("/bytes/old-half?size=200000")
        let content = TestContent(name: "old-half", size: 200_000)
        let completed = temporary.url.appendingPathComponent("completed")
        let downloading = temporary.url.appendingPathComponent("downloading")
        try FileManager.default.createDirectory(at: completed, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: downloading, withIntermediateDirectories: true)
        let doneFile = completed.appendingPathComponent("old-done")
        try TestContent(name: "old-done", size: 3000).data.write(to: doneFile)
        let key = DownloadDirectory.key(for: half)
        let bytes = content.bytes(in: 0..<80_000)
        try Data(bytes).write(to: downloading.appendingPathComponent("\(key).part"))
        var md5 = MD5()
        md5.update(data: bytes)
        let saved = PartialState(
            url: half, hashedLength: 80_000, hash: .md5(md5),
            validators: Validators(etag: content.etag, lastModified: nil), totalLength: 200_000, rangesSupported: true)
        try JSONEncoder().encode(saved).write(to: downloading.appendingPathComponent("\(key).part.json"))
        let old = """
            {"records":[
            {"options":{"headers":{}},"receipt":{"url":"\(done.absoluteString)","filename":"old-done","fileURL":"\(doneFile.absoluteString)","state":"completed","totalBytesWritten":3000,"totalBytesExpectedToWrite":3000,"md5":"\(TestContent(name: "old-done", size: 3000).md5.hexString)"}},
            {"options":{"headers":{}},"receipt":{"url":"\(half.absoluteString)","filename":"x","fileURL":"\(downloading.appendingPathComponent("\(key).part").absoluteString)","state":"willResume","totalBytesWritten":80000}}
            ],"version":1}
            """
        try Data(old.utf8).write(to: temporary.url.appendingPathComponent("receipts.json"))

        let manager = try DownloadManager(configuration: configuration())
        #expect(manager.receiptsRecoveryError == nil)
        #expect(await manager.receipt(for: done)?.state == .completed)
        #expect(await manager.receipt(for: half)?.state == .suspended)
        #expect(await manager.receipt(for: half)?.totalBytesWritten == 80_000)
        #expect(!FileManager.default.fileExists(atPath: temporary.url.appendingPathComponent("receipts.json").path))
        #expect(!FileManager.default.fileExists(atPath: downloading.path))
        let receipt = try await manager.download(half)
        #expect(receipt.md5 == content.md5.hexString)
        #expect(server.requests.filter { $0.method == "GET" }.first?.rangeStart == 80_000, "resumed, not refetched")
        #expect(try await manager.download(done).fileURL == doneFile)
        await manager.shutdown()
    }

    @Test(
        "On a redirect to another host Authorization, Proxy-Authorization and Cookie are dropped; other headers follow")
    func crossHostHeaders() async throws {
        let manager = try DownloadManager(configuration: configuration())
        let headers = ["Authorization": "Bearer a", "Proxy-Authorization": "Basic b", "Cookie": "c=1", "X-Trace": "t"]
        _ = try await manager.download(
            server.url("/redirect-host/bytes/moved?size=100"), options: DownloadOptions(headers: headers))
        let first = try #require(server.requests.first { $0.path == "/redirect-host/bytes/moved" })
        let moved = try #require(server.requests.first { $0.path == "/bytes/moved" })
        #expect(moved.value(forHeader: "Host")?.hasPrefix("localhost") == true)
        for name in ["Authorization", "Proxy-Authorization", "Cookie"] {
            #expect(first.value(forHeader: name) != nil && moved.value(forHeader: name) == nil, "\(name)")
        }
        #expect(moved.value(forHeader: "X-Trace") == "t")
        await manager.shutdown()
    }

    @Test("A change costs one journal line, however many receipts there are")
    func saveCost() async throws {
        let state = temporary.url.appendingPathComponent(".downloader")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let entries = (0..<2_000).map { index -> String in
            "http://127.0.0.1:1/old/\(index)\t"
                + #"{"put":{"url":"http://127.0.0.1:1/old/\#(index)","options":{},"state":"suspended"}}"#
        }
        try Data((entries.joined(separator: "\n") + "\n").utf8).write(to: state.appendingPathComponent("journal"))
        let manager = try DownloadManager(configuration: configuration())
        #expect(await manager.allReceipts.count == 2_000)
        let journal = state.appendingPathComponent("journal")
        let before = try #require(fileSize(journal))
        await manager.suspend(server.url("/none"))  // unknown: no change, no write
        await manager.remove(URL(string: "http://127.0.0.1:1/old/7")!)
        await manager.saveReceiptsNow()
        let after = try #require(fileSize(journal))
        #expect(after - before > 0 && after - before < 200, "one removal line, not a rewrite of 2,000 receipts")
        await manager.shutdown()
    }
}
