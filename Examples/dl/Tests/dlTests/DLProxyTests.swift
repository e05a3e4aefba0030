import Downloader
import Foundation
import HTTPTestServer
import Testing

/// Issue #23: a forward proxy named by `http_proxy` (libcurl reads it; URLSession on Linux ignores
/// `connectionProxyDictionary`). A second test server plays the proxy: it records the absolute-form requests it gets
/// and answers them with the origin's deterministic bytes.
@Suite("dl through a proxy")
final class DLProxyTests: Sendable {
    let workspace: TestWorkspace
    let proxy: HTTPTestServer
    var origin: HTTPTestServer { workspace.server }
    var work: URL { workspace.directory }

    init() throws {
        workspace = try TestWorkspace(prefix: "dl-proxy")
        proxy = try HTTPTestServer()
    }

    deinit {
        proxy.stopInBackground()
    }

    func run(_ arguments: [String], noProxy: String = "") async throws -> DLProcess.Outcome {
        let environment = [
            "http_proxy": proxy.baseURL.absoluteString, "HTTP_PROXY": "", "no_proxy": noProxy, "NO_PROXY": "",
        ]
        return try await DLProcess(arguments, in: work, environment: environment).wait()
    }

    @Test("A download and a resume after a dropped connection go through http_proxy; the origin sees nothing")
    func throughProxy() async throws {
        let size = 600_000
        let url = origin.url("/bytes/proxied.bin?size=\(size)&dropAt=300000")
        let outcome = try await run(["--dir", work.path, url.absoluteString])
        #expect(outcome.status == 0, "\(outcome.stderr)")
        let file = work.appendingPathComponent("proxied.bin")
        #expect(MD5.hash(data: try Data(contentsOf: file)) == TestContent(name: "proxied.bin", size: size).md5)
        let gets = proxy.requests.filter { $0.method == "GET" }
        #expect(gets.allSatisfy { $0.target.hasPrefix("http://127.0.0.1:\(origin.port)/bytes/proxied.bin") })
        #expect(gets.contains { ($0.rangeStart ?? 0) >= 300_000 - 65_536 }, "the resume by Range went through it")
        #expect(origin.requests.isEmpty, "\(origin.requests.map(\.target))")
    }

    @Test("no_proxy names hosts reached directly")
    func bypassed() async throws {
        let url = origin.url("/bytes/direct.bin?size=1000")
        let outcome = try await run(["--dir", work.path, url.absoluteString], noProxy: "127.0.0.1")
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(proxy.requests.isEmpty)
        #expect(!origin.requests.isEmpty)
    }
}
