import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Issue #36: a manager's cookies — the Netscape cookie file curl, wget and aria2c share, sent by domain and path,
/// never to another host, updated by responses, never in the download state.
@Suite("DownloadCookieJar")
final class DownloadCookieJarTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }

    init() throws {
        workspace = try TestWorkspace()
    }

    static let file = """
        # Netscape HTTP Cookie File
        # a comment

        127.0.0.1\tFALSE\t/\tFALSE\t0\tgate\topen
        .example.com\tTRUE\t/docs\tTRUE\t4102444800\tsid\tabc
        #HttpOnly_127.0.0.1\tFALSE\t/bytes\tFALSE\t4102444800\tlogin\tyes
        127.0.0.1\tFALSE\t/\tFALSE\t1000\told\tgone
        not a cookie line
        """

    @Test("A Netscape file is read (comments, #HttpOnly_, dotted domains; expired and malformed lines skipped)")
    func readsAndWrites() throws {
        let source = workspace.directory.appendingPathComponent("cookies.txt")
        try Self.file.write(to: source, atomically: true, encoding: .utf8)
        let jar = try DownloadCookieJar(contentsOf: source)
        #expect(jar.count == 3)
        #expect(jar.header(for: URL(string: "http://127.0.0.1:9/bytes/a")!) == "gate=open; login=yes")
        #expect(jar.header(for: URL(string: "http://127.0.0.1:9/other")!) == "gate=open")
        #expect(jar.header(for: URL(string: "https://www.example.com/docs/x")!) == "sid=abc")
        #expect(jar.header(for: URL(string: "http://www.example.com/docs/x")!) == nil, "secure: https only")
        #expect(jar.header(for: URL(string: "https://example.org/docs/x")!) == nil, "never another host")

        let copy = workspace.directory.appendingPathComponent("saved.txt")
        try jar.write(to: copy)
        let mode = try FileManager.default.attributesOfItem(atPath: copy.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let again = try DownloadCookieJar(contentsOf: copy)
        #expect(again.list.withLock { $0 } == jar.list.withLock { $0 }, "the same cookies after a round trip")
        #expect(throws: DownloadError.fileSystem) {
            try DownloadCookieJar(contentsOf: workspace.directory.appendingPathComponent("missing.txt"))
        }
    }

    @Test("A cookie file of 100,001 lines is read in linear time, and replaced cookies keep one place (issue #48)")
    func largeFileIsLinear() throws {
        // Reading it took 19–22 s in a release build: each cookie was compared with every one before it. No wall-clock
        // bound (a busy machine stretches any): the read is timed against parsing the same lines one by one, which is
        // linear by construction, in the same run and interleaved, the faster of two each. Linear, the read costs a
        // small multiple of the parse; the square cost thousands of times it at this size.
        let count = runsUnderSanitizer ? 20_000 : 100_000
        var text = "# Netscape HTTP Cookie File\n"
        for index in 0..<count {
            text += ".site\(index % 500).example\tTRUE\t/p\(index)\tFALSE\t0\tc\(index)\tv\(index)\n"
        }
        text += ".site0.example\tTRUE\t/p0\tFALSE\t0\tc0\treplaced\n"  // the same name, domain and path: replaces
        let source = workspace.directory.appendingPathComponent("many.txt")
        try text.write(to: source, atomically: true, encoding: .utf8)
        let lines = text.split(separator: "\n").map(String.init)
        var parse = Duration.seconds(1_000)
        var read = Duration.seconds(1_000)
        var jar = DownloadCookieJar()
        for _ in 0..<2 {
            var started = ContinuousClock.now
            let parsed = lines.compactMap { DownloadCookieJar.cookie(netscapeLine: $0) }
            parse = min(parse, ContinuousClock.now - started)
            #expect(parsed.count == count + 1)
            started = ContinuousClock.now
            jar = try DownloadCookieJar(contentsOf: source)
            read = min(read, ContinuousClock.now - started)
        }
        #expect(read < parse * 20, "reading \(count) cookies took \(read); parsing their lines \(parse)")
        #expect(jar.count == count)
        #expect(jar.header(for: URL(string: "http://www.site0.example/p0")!) == "c0=replaced")
        #expect(jar.header(for: URL(string: "http://site7.example/p7/x")!) == "c7=v7")
        // A request looks at its host's cookies (200 here), not all: 100 lookups cost less than parsing every line.
        var lookups = Duration.seconds(1_000)
        for _ in 0..<2 {
            let started = ContinuousClock.now
            for index in 0..<100 { _ = jar.header(for: URL(string: "http://a.site\(index).example/p\(index)")!) }
            lookups = min(lookups, ContinuousClock.now - started)
        }
        #expect(lookups < parse, "100 lookups took \(lookups); parsing \(count) lines \(parse)")
    }

    @Test("A manager sends its jar's cookies, keeps the ones servers set, and keeps a download's own Cookie beside")
    func managerUsesTheJar() async throws {
        let jar = DownloadCookieJar()
        var configuration = DownloadManager.Configuration.forTests(directory: workspace.directory)
        configuration.cookies = jar
        let manager = try DownloadManager(configuration: configuration)
        // A gate: the first request gets a 302 that sets `g1=open`; the jar keeps it for later requests.
        _ = try await manager.download(server.url("/bytes/gated?size=1000&cookieGate=g1"))
        #expect(jar.count == 1)
        server.resetStatistics()
        // Another download behind the same gate goes straight through; its own Cookie header goes beside.
        let second = server.url("/bytes/gated2?size=1000&cookieGate=g1")
        _ = try await manager.download(second, options: DownloadOptions(headers: ["Cookie": "mine=1"]))
        let requests = server.statistics.requests
        #expect(requests.count == 1, "no 302: \(requests.map(\.target))")
        #expect(requests.first?.value(forHeader: "Cookie") == "mine=1; g1=open", "\(requests.map(\.headers))")
        await manager.shutdown()
        let journal = try String(
            contentsOf: workspace.directory.appendingPathComponent(".downloader/journal"), encoding: .utf8)
        #expect(!journal.contains("g1=open") && !journal.contains("mine=1"), "cookies never reach the state")
    }

    @Test("Without a jar of its own a manager still keeps a download's Cookie header beside the cookies servers set")
    func ownCookieKept() async throws {
        let manager = try DownloadManager(configuration: .forTests(directory: workspace.directory))
        _ = try await manager.download(server.url("/bytes/kept?size=1000&cookieGate=g2"))
        server.resetStatistics()
        let second = server.url("/bytes/kept2?size=1000&cookieGate=g2")
        _ = try await manager.download(second, options: DownloadOptions(headers: ["Cookie": "mine=2"]))
        let sent = server.statistics.requests.compactMap { $0.value(forHeader: "Cookie") }
        // d1ecfd3 … f8c713f: URLSession's own cookie storage replaced the header with `g2=open` (corelibs'
        // `setCookies(on:)`): the download's cookie was never sent.
        #expect(sent.first == "mine=2; g2=open", "\(sent)")
        await manager.shutdown()
    }
}
