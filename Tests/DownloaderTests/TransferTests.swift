import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Each test has its own server, session and directory.
@Suite("Transfer")
final class TransferTests: Sendable {
    let server: HTTPTestServer
    let bridge: SessionBridge
    let temporary: TemporaryDirectory
    let directory: DownloadDirectory

    /// One session for all transfer tests: creating and invalidating one per test hits a teardown race in
    /// swift-corelibs-foundation (#4791, #5469). The manager, too, keeps one session for its whole life.
    /// Its watchdog is long: no engine test here is about stalls (the managers' tests are), and an instrumented run on
    /// a saturated machine can leave a healthy request without bytes for seconds.
    static let sharedBridge = SessionBridge(configuration: .init(stallTimeout: 60))

    init() throws {
        server = try HTTPTestServer()
        bridge = Self.sharedBridge
        temporary = try TemporaryDirectory()
        directory = DownloadDirectory(root: temporary.url)
    }

    deinit {
        server.stopInBackground()
        temporary.remove()
    }

    func transfer(
        _ path: String, options: DownloadOptions = DownloadOptions(), window: Int64 = 16 << 20
    ) -> Transfer {
        // Windows of one size: these tests count requests (growing windows have tests of their own).
        Transfer(
            url: server.url(path), options: options, directory: directory, bridge: bridge,
            configuration: .init(
                windowSize: window, maximumWindowSize: window, firstWindowSize: min(window, 64 << 10),
                firstRequestBudget: nil))
    }

    func gets(_ name: String) -> [RecordedRequest] {
        server.requests.filter { $0.method == "GET" && $0.path == "/bytes/\(name)" }
    }

    @Test("A plain download lands in the completed area with the right bytes and name")
    func plainDownload() async throws {
        let content = TestContent(name: "plain", size: 1_000_000)
        let result = try await Transfer(
            url: server.url("/bytes/plain?size=1000000"), options: DownloadOptions(), directory: directory,
            bridge: bridge
        ).run()
        #expect(result.md5 == content.md5)
        #expect(try md5OfFile(result.fileURL) == content.md5)
        #expect(result.length == 1_000_000)
        #expect(result.fileURL.deletingLastPathComponent().lastPathComponent == "completed")
        // The default name: the URL's last path component (the server sends no Content-Disposition here).
        #expect(result.fileURL.lastPathComponent == "plain")
        #expect(temporary.files() == ["completed/\(result.fileURL.lastPathComponent)"])
        // One request for a whole window (`FirstRequestBudget`: a fast first request is not cut short).
        let requests = gets("plain")
        #expect(requests.first?.range == "bytes=0-8388607")
        #expect(requests.first?.value(forHeader: "Accept-Encoding") == "identity")
    }
}

extension TransferTests {
    @Test("A small file fetched in one request is held in memory while it runs: no state, no partial file")
    func smallFileInOneRequestSavesNoState() async throws {
        let url = server.url("/bytes/smallone?size=500000&stallAfter=100000&stall=60&stallCount=2")
        // The production first request, with a budget judged only after ten minutes (not on a slow machine).
        let budget = FirstRequestBudget(measuring: 600_000_000_000, remaining: 1_000_000_000)
        let received = Locked<Int64>(0)
        let transfer = Transfer(
            url: url, options: DownloadOptions(), directory: directory, bridge: bridge,
            configuration: .init(firstRequestBudget: budget),
            progress: { written, _ in received.withLock { $0 = max($0, written) } })
        let task = Task { try await transfer.run() }
        #expect(await server.waitUntil { $0.bodyBytesSent >= 100_000 })
        #expect(gets("smallone").map(\.range) == ["bytes=0-8388607"])
        // The lean path of a fresh download (issue #52) keeps a small file's body in memory and counts it as it
        // arrives: once all that was sent is counted, neither a state nor a partial file was made for it.
        let deadline = TestTime.deadline(in: .seconds(60))
        while received.withLock({ $0 }) < 100_000 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))  // polling the count with a deadline
        }
        #expect(received.withLock { $0 } == 100_000)
        #expect(fileSize(directory.partialFile(for: url)) == nil)
        #expect(fileSize(directory.stateFile(for: url)) == nil)
        task.cancel()
        _ = await task.result
        // A stop keeps what arrived for the next run, as bytes written as they came were kept.
        #expect(fileSize(directory.partialFile(for: url)) == 100_000)
        #expect(fileSize(directory.stateFile(for: url)) != nil)
        // The rule: at most 1 MiB and within one normal window; the short first request does not count.
        #expect(
            ResponseJudge.isSmall(500_000, windowSize: 8 << 20) && ResponseJudge.isSmall(1 << 20, windowSize: 8 << 20))
        #expect(
            !ResponseJudge.isSmall(500_000, windowSize: 65_536) && !ResponseJudge.isSmall(2 << 20, windowSize: 8 << 20))
    }

    @Test("A fresh download starts with its first GET; only a resume asks HEAD whether the saved bytes still match")
    func headOnlyWhenResuming() async throws {
        let size = 200_000
        let path = "/bytes/probe?size=\(size)&dropAt=100000"
        let first = await runTransfer(transfer(path, window: 65_536))
        #expect(throws: DownloadError.connectionFailed) { try first.get() }
        let methods = { self.server.requests.filter { $0.path == "/bytes/probe" }.map(\.method) }
        #expect(methods() == ["GET", "GET"])

        let result = try await transfer(path, window: 65_536).run()
        #expect(result.resumedBytes == 100_000)
        #expect(result.md5 == TestContent(name: "probe", size: size).md5)
        #expect(methods() == ["GET", "GET", "HEAD", "GET", "GET"])
    }

    @Test("A download that fails before any byte arrives leaves no partial file or state behind")
    func failureBeforeAnyByteLeavesNothing() async throws {
        let url = server.url("/bytes/missing?size=1000&status=404")
        await #expect(throws: DownloadError.httpStatus) {
            try await self.transfer("/bytes/missing?size=1000&status=404").run()
        }
        #expect(fileSize(directory.partialFile(for: url)) == nil)
        #expect(fileSize(directory.stateFile(for: url)) == nil)
    }

    @Test("Windows are fetched in order, each a closed Range, never overlapping")
    func windowsInOrder() async throws {
        let size = 5 * 65_536 + 123
        let result = try await transfer("/bytes/win?size=\(size)", window: 65_536).run()
        #expect(result.md5 == TestContent(name: "win", size: size).md5)
        let ranges = gets("win").map(\.range)
        #expect(ranges == (0..<6).map { i in "bytes=\(i * 65_536)-\(min(size, (i + 1) * 65_536) - 1)" })
        #expect(
            gets("win").dropFirst().allSatisfy {
                $0.value(forHeader: "If-Range") == TestContent(name: "win", size: size).etag
            })
    }

    @Test(
        "After a drop at offset N the next run resumes with Range: bytes=N-, across window edges",
        arguments: [0, 1, 16_383, 16_384, 16_385, 65_535, 65_536, 65_537, 199_999])
    func resumeAfterDrop(dropAt: Int) async throws {
        let size = 200_000
        let path = "/bytes/drop\(dropAt)?size=\(size)&dropAt=\(dropAt)"
        let first = await runTransfer(transfer(path, window: 65_536))
        guard case .failure(let error) = first else {
            Issue.record("the dropped transfer should fail, got \(first)")
            return
        }
        #expect(error == .connectionFailed)
        #expect(error.isTransient)
        let partial = directory.partialFile(for: server.url(path))
        // Nothing received leaves nothing behind; otherwise the partial file holds exactly what arrived.
        #expect(fileSize(partial) == (dropAt == 0 ? nil : Int64(dropAt)))

        let result = try await transfer(path, window: 65_536).run()
        #expect(result.md5 == TestContent(name: "drop\(dropAt)", size: size).md5)
        #expect(try md5OfFile(result.fileURL) == result.md5)
        #expect(result.resumedBytes == Int64(dropAt))
        // The request after the failed one starts exactly at the partial length.
        let starts = gets("drop\(dropAt)").map(\.rangeStart)
        let failed = try #require(
            starts.firstIndex { start in start.map { $0 <= dropAt && dropAt < $0 + 65_536 } ?? false })
        #expect(starts.count > failed + 1 && starts[failed + 1] == dropAt, "GET range starts: \(starts)")
        #expect(server.statistics.bodyBytesSent == Int64(size))  // not one byte fetched twice
    }

    @Test("A server that ignores Range gets one whole stream, and a resume starts over")
    func rangeIgnored() async throws {
        let size = 150_000
        let path = "/bytes/nr?size=\(size)&norange=1&drop=40000"
        let first = await runTransfer(transfer(path, window: 65_536))
        #expect(throws: DownloadError.connectionFailed) { try first.get() }
        let result = try await transfer(path, window: 65_536).run()
        #expect(result.md5 == TestContent(name: "nr", size: size).md5)
        #expect(gets("nr").count == 2)
        // Without Accept-Ranges the resume does not ask for a range it cannot get.
        #expect(gets("nr").last?.range == nil)
    }

    @Test("A server that claims ranges but ignores them is streamed from byte 0 without splicing")
    func rangeClaimedButIgnored() async throws {
        let size = 150_000
        let path = "/bytes/liar?size=\(size)&norange=lie&drop=40000"
        _ = await runTransfer(transfer(path, window: 65_536))
        let result = try await transfer(path, window: 65_536).run()
        #expect(result.md5 == TestContent(name: "liar", size: size).md5)
        // The first attempt asked for a window and got 200: the engine learned that Range is ignored and the second
        // attempt streams the whole body instead of asking for a range it would not get.
        #expect(gets("liar").map(\.range) == ["bytes=0-65535", nil])
    }

    @Test("A file that changed between attempts restarts cleanly and ends as the new version")
    func changedBetweenAttempts() async throws {
        let size = 120_000
        let path = "/bytes/chg?size=\(size)&change=1&drop=50000"
        _ = await runTransfer(transfer(path))
        let result = try await transfer(path).run()
        #expect(result.md5 == TestContent(name: "chg", size: size, version: 1).md5)
        #expect(gets("chg").last?.rangeStart == 0)
    }

    @Test("A Last-Modified as recent as the response's Date is weak: never sent in If-Range (Apache answers 200)")
    func weakDateIsNotSentInIfRange() async throws {
        // Found against Apache 2.4: a file written in the same second as the response has a weak ETag and a weak date;
        // the date went out in If-Range, Apache rightly answered the whole file (200), and the download took it for a
        // server that ignores Range — a whole 96 MiB body then stopped against the disk-lag rule.
        let size = 3 << 20
        let name = "weakdate"
        let result = try await transfer("/bytes/\(name)?size=\(size)&etag=weak&lastModified=now", window: 1 << 20).run()
        #expect(try md5OfFile(result.fileURL) == TestContent(name: name, size: size).md5)
        let ranged = gets(name).dropFirst()
        #expect(ranged.count >= 2, "windows after the first: \(ranged.count)")
        let sent = ranged.map { $0.value(forHeader: "If-Range") ?? "-" }
        #expect(sent.allSatisfy { $0 == "-" }, "If-Range sent: \(sent)")
        // Windows overlap a little (the bytes before each are compared, there being no validator to send).
        #expect(server.statistics.bodyBytesSent < Int64(size) + Int64(size) / 10, "no whole body was sent again")
    }

    @Test("A file that changes between windows is caught by If-Range and ends as the new version")
    func changedBetweenWindows() async throws {
        let size = 5 * 65_536
        let result = try await transfer("/bytes/chw?size=\(size)&change=2", window: 65_536).run()
        // GETs 0 and 1 serve version 0; GET 2 carries If-Range of version 0 and gets version 1 whole (200).
        #expect(result.md5 == TestContent(name: "chw", size: size, version: 1).md5)
        #expect(gets("chw").count == 3)
        #expect(gets("chw")[2].value(forHeader: "If-Range") == TestContent(name: "chw", size: size, version: 0).etag)
    }

    @Test("A whole partial file with no HEAD gets 416 and completes without downloading the body again")
    func unsatisfiableOnWholeFile() async throws {
        let size = 50_000
        let path = "/bytes/whole?size=\(size)&nohead=1&drop=\(size)"
        // The first run receives every byte, but the drop closes the connection before success is reported... so
        // make the first run fail after the bytes by announcing more than it sends.
        let content = TestContent(name: "whole", size: size)
        let url = server.url(path)
        try directory.createAreas()
        try Data(content.bytes(in: 0..<size)).write(to: directory.partialFile(for: url))
        var md5 = MD5()
        md5.update(data: content.bytes(in: 0..<1000))
        var state = PartialState(
            url: url, hashedLength: 0, hash: .md5(md5), validators: Validators(etag: content.etag, lastModified: nil),
            totalLength: nil, rangesSupported: true)
        state.hashedLength = 1000  // a checkpoint behind the file: only bytes 1000..<size are re-hashed
        state.file = directory.partialFiles(for: url).partialIdentity  // the file as the state saw it: trusted
        try directory.partialFiles(for: url).saveState(state)

        let result = try await transfer(path).run()
        #expect(result.md5 == content.md5)
        #expect(result.receivedBytes == 0)
        #expect(gets("whole").map(\.range) == ["bytes=\(size)-\(size + 16 << 20 - 1)"])
        #expect(server.statistics.bodyBytesSent == 0)
    }

    @Test("A body shorter than its Content-Length fails the first time and resumes to the right bytes")
    func shortBody() async throws {
        let size = 80_000
        let content = TestContent(name: "short", size: size)
        // lengthExtra: Content-Length says 500 more than the 206 carries; our accounting trusts Content-Range.
        let result = try await transfer("/bytes/short?size=\(size)&lengthExtra=500").run()
        #expect(result.md5 == content.md5)
    }

    @Test("gzip offered by libcurl does not leak in: requests say identity and the bytes are the raw content")
    func gzipDoesNotLeak() async throws {
        let size = 200_000
        let result = try await transfer("/bytes/gz?size=\(size)&gzip=1").run()
        #expect(result.md5 == TestContent(name: "gz", size: size).md5)
        #expect(server.requests.allSatisfy { $0.value(forHeader: "Accept-Encoding") == "identity" })
    }

    @Test("A wrong Content-MD5 restarts once from 0, then fails, and nothing reaches the completed area")
    func wrongContentMD5() async throws {
        let outcome = await runTransfer(transfer("/bytes/bad?size=30000&md5=bad"))
        guard case .failure(let error) = outcome else {
            Issue.record("expected a checksum failure")
            return
        }
        #expect(error == .checksumMismatch)
        #expect(error.description.contains("expected"))
        #expect(gets("bad").map(\.rangeStart) == [0, 0])
        #expect(temporary.files().isEmpty)
    }

    @Test("A wrong expected MD5 fails; the right one wins over a wrong Content-MD5")
    func expectedMD5Wins() async throws {
        let content = TestContent(name: "exp", size: 30_000)
        let wrong = DownloadOptions(expectedMD5: String(repeating: "0", count: 32))
        await #expect(throws: DownloadError.checksumMismatch) {
            try await self.transfer("/bytes/exp?size=30000", options: wrong).run()
        }
        let right = DownloadOptions(expectedMD5: content.md5.hexString.uppercased())
        let result = try await transfer("/bytes/exp?size=30000&md5=bad", options: right).run()
        #expect(result.md5 == content.md5)
        let malformed = DownloadOptions(expectedMD5: "xyz")
        await #expect(throws: DownloadError.invalidChecksum) {
            try await self.transfer("/bytes/exp?size=30000", options: malformed).run()
        }
    }

    @Test("A correct Content-MD5 and Digest verify the download")
    func announcedDigestVerifies() async throws {
        let result = try await transfer("/bytes/ok?size=70000&md5=1&digest=1").run()
        #expect(result.md5 == TestContent(name: "ok", size: 70_000).md5)
    }

    @Test(
        "Hostile suggested names stay inside the completed area",
        arguments: [
            ("../../x", "x"), ("/etc/passwd", "passwd"), ("a\u{1}b\u{7f}.txt", "ab.txt"), ("..", "bytes-hostile"),
            ("..\\..\\win.ini", "win.ini"), (".hidden", "hidden"),
        ])
    func hostileNames(name: String, expected: String) async throws {
        let encoded = name.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let path = "/bytes/bytes-hostile?size=100&filename=\(encoded)"
        let result = try await transfer(path, options: DownloadOptions(naming: .suggested)).run()
        #expect(result.fileURL.lastPathComponent == expected)
        #expect(
            result.fileURL.deletingLastPathComponent().standardizedFileURL
                == directory.completedArea.standardizedFileURL)
    }

    @Test("A suggested name never overwrites an unrelated file")
    func suggestedNameDoesNotOverwrite() async throws {
        try directory.createAreas()
        let existing = directory.completedArea.appendingPathComponent("report.pdf")
        try Data("mine".utf8).write(to: existing)
        let result = try await transfer(
            "/bytes/r1?size=100&filename=report.pdf", options: DownloadOptions(naming: .suggested)
        ).run()
        #expect(result.fileURL.lastPathComponent == "report (1).pdf")
        #expect(try Data(contentsOf: existing) == Data("mine".utf8))
    }

    @Test("Disk write errors surface as DownloadError.fileSystem, never a trap", .enabled(if: SmallDisk.isAvailable))
    func diskFull() async throws {
        let path = "/bytes/full?size=100000"
        // The partial area is a disk too small for the file.
        try FileManager.default.createDirectory(at: directory.stateArea, withIntermediateDirectories: true)
        let disk = try SmallDisk(at: directory.partialArea, size: "16k")
        defer { disk.unmount() }
        let outcome = await runTransfer(transfer(path))
        guard case .failure(let error) = outcome else {
            Issue.record("expected a file-system error")
            return
        }
        #expect(error == .fileSystem)
        #expect(error.url == server.url(path))
        #expect(
            !FileManager.default.fileExists(
                atPath: directory.completedArea.appendingPathComponent(DownloadDirectory.key(for: server.url(path)))
                    .path))
    }

    @Test("Redirects are followed up to 10; 11 and loops fail clearly")
    func redirects() async throws {
        let content = TestContent(name: "rd", size: 1000)
        let result = try await transfer("/redirect/9/bytes/rd?size=1000").run()
        #expect(result.md5 == content.md5)
        await #expect(throws: DownloadError.tooManyRedirects) {
            try await self.transfer("/redirect/11/bytes/rd?size=1000").run()
        }
        await #expect(throws: DownloadError.tooManyRedirects) { try await self.transfer("/loop/0").run() }
    }

    @Test("HTTP errors fail with their status; 404 at once, 503 marked transient with Retry-After")
    func httpErrors() async throws {
        let notFound = await runTransfer(transfer("/status/404"))
        #expect(throws: DownloadError.httpStatus) { try notFound.get() }
        if case .failure(let error) = notFound {
            #expect(error.statusCode == 404 && !error.isTransient)
        }
        let busy = await runTransfer(transfer("/bytes/busy?size=10&status=503&retryAfter=7"))
        if case .failure(let error) = busy {
            #expect(error.statusCode == 503 && error.isTransient && error.retryAfter == 7)
        } else {
            Issue.record("expected 503")
        }
    }

    @Test("Cancelling pauses: the partial file is kept and the next run resumes from its real length")
    func cancelThenResume() async throws {
        let size = 400_000
        let path = "/bytes/pause?size=\(size)&rate=400000"
        let first = Task { await runTransfer(transfer(path, window: 65_536)) }
        #expect(await server.waitUntil { $0.bodyBytesSent >= 100_000 })
        first.cancel()
        await #expect(throws: DownloadError.cancelled) { try await first.value.get() }
        let kept = try #require(fileSize(directory.partialFile(for: server.url(path))))
        #expect(kept >= 65_536 && kept < Int64(size))

        let result = try await transfer("/bytes/pause?size=\(size)&rate=400000", window: 65_536).run()
        #expect(result.md5 == TestContent(name: "pause", size: size).md5)
        #expect(result.resumedBytes == kept)
        #expect(gets("pause").last { $0.rangeStart == Int(kept) } != nil)
    }

    @Test("An empty resource completes with the MD5 of nothing")
    func emptyResource() async throws {
        let result = try await transfer("/bytes/empty?size=0").run()
        #expect(result.length == 0)
        #expect(result.md5?.hexString == "d41d8cd98f00b204e9800998ecf8427e")
    }

    @Test("With hashing off the file is still right but has no MD5; a hashed resume re-hashes it from byte 0")
    func hashingOff() async throws {
        let size = 200_000
        let plain = try await transfer("/bytes/nohash?size=\(size)", options: DownloadOptions(computesChecksum: false))
            .run()
        #expect(plain.md5 == nil)
        #expect(try md5OfFile(plain.fileURL) == TestContent(name: "nohash", size: size).md5)

        let path = "/bytes/mixed?size=\(size)&dropAt=120000"
        _ = await runTransfer(transfer(path, options: DownloadOptions(computesChecksum: false), window: 65_536))
        let resumed = try await transfer(path, window: 65_536).run()
        #expect(resumed.resumedBytes == 120_000)
        #expect(resumed.md5 == TestContent(name: "mixed", size: size).md5)
    }
}
