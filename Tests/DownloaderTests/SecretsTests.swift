import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

#if canImport(Glibc)
    import Glibc
#endif

/// Secrets never reach the disk (issue #36): no password, URL user, `Authorization`, `Cookie` or
/// `Proxy-Authorization` value in the journal, a partial state or a file's extended attributes. Failed on d1ecfd3.
@Suite("Secrets")
final class SecretsTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var temporary: TemporaryDirectory { TemporaryDirectory(existing: workspace.directory) }

    init() throws {
        workspace = try TestWorkspace()
    }

    // listxattr(2) and getxattr(2), looked up by name: the Glibc module does not export sys/xattr.h.
    typealias List = @convention(c) (UnsafePointer<CChar>, UnsafeMutableRawPointer?, Int) -> Int
    typealias Get = @convention(c) (UnsafePointer<CChar>, UnsafePointer<CChar>, UnsafeMutableRawPointer?, Int) -> Int
    static let listxattr: List? = dlsym(nil, "listxattr").map { unsafeBitCast($0, to: List.self) }
    static let getxattr: Get? = dlsym(nil, "getxattr").map { unsafeBitCast($0, to: Get.self) }

    static let secrets = [
        "hunter2", "alice", "Bearer-TOKEN-42", "session=COOKIE-77", "Basic UFJPWFk=", "mirror-pass-9",
    ]

    /// Every byte under the directory, extended attributes included, as text.
    func everythingOnDisk() -> String {
        var text = ""
        let root = temporary.url.path
        for path in (FileManager.default.enumerator(atPath: root)?.allObjects as? [String]) ?? [] {
            let full = root + "/" + path
            if let data = FileManager.default.contents(atPath: full) { text += String(decoding: data, as: UTF8.self) }
            var names = [UInt8](repeating: 0, count: 4096)
            guard let list = Self.listxattr, let get = Self.getxattr else { continue }
            let count = list(full, &names, names.count)
            guard count > 0 else { continue }
            for name in String(decoding: names[0..<count], as: UTF8.self).split(separator: "\0") {
                var value = [UInt8](repeating: 0, count: 8192)
                let length = get(full, String(name), &value, value.count)
                if length > 0 { text += String(decoding: value[0..<length], as: UTF8.self) }
            }
        }
        return text
    }

    @Test("URL user and password and secret headers are kept in memory only; a restart asks for them again")
    func secretsStayInMemory() async throws {
        var components = URLComponents(
            url: server.url("/bytes/private?size=400000&stallAfter=100000&stall=60&stallCount=1&stallReached=1"),
            resolvingAgainstBaseURL: false)!
        components.user = "alice"
        components.password = "hunter2"
        let url = components.url!
        var options = DownloadOptions(headers: [
            "Authorization": "Bearer-TOKEN-42", "Cookie": "session=COOKIE-77", "Proxy-Authorization": "Basic UFJPWFk=",
            "X-Public": "kept",
        ])
        // A mirror's user and password too (a mirror is tried only when the URL fails: this one never is).
        options.mirrors = [URL(string: "http://bob:mirror-pass-9@127.0.0.1:1/private")!]
        let first = try DownloadManager(configuration: .forTests(directory: temporary.url))
        await first.enqueue(url, options: options)
        #expect(await server.waitUntil { $0.stallsBegun >= 1 })
        await first.shutdown()
        let saved = everythingOnDisk()
        let leaked = Self.secrets.filter { saved.contains($0) }
        #expect(leaked.isEmpty, "reached the disk: \(leaked)")
        let keptOthers = saved.contains("kept")
        #expect(keptOthers, "the other headers are saved")
        // The requests carried them.
        let request = try #require(server.requests.last)
        #expect(request.value(forHeader: "Authorization") == "Bearer-TOKEN-42")

        // After a restart the download is known without them; asked again with them, it resumes by Range.
        let second = try DownloadManager(configuration: .forTests(directory: temporary.url))
        let restored = try #require(await second.allReceipts.first)
        #expect(!restored.url.absoluteString.contains("hunter2") && restored.state == .suspended)
        let receipt = try await second.download(url, options: options)
        #expect(receipt.state == .completed)
        #expect(server.requests.filter { $0.method == "GET" }.last?.rangeStart ?? 0 > 0, "resumed")
        #expect(server.requests.last?.value(forHeader: "Authorization") == "Bearer-TOKEN-42")
        await second.shutdown()
        let after = everythingOnDisk()
        let leakedAfter = Self.secrets.filter { after.contains($0) }
        #expect(leakedAfter.isEmpty, "reached the disk: \(leakedAfter)")
    }
}

extension SecretsTests {
    @Test("A journal an earlier version saved with credentials is rewritten without them; its partial file is kept")
    func earlierJournalRewritten() async throws {
        let url = URL(string: "http://alice:hunter2@127.0.0.1:\(server.port)/bytes/old?size=300000")!
        let state = temporary.url.appendingPathComponent(".downloader")
        try FileManager.default.createDirectory(
            at: state.appendingPathComponent("partial"), withIntermediateDirectories: true)
        let line =
            #"{"put":{"url":"\#(url.absoluteString)","state":"suspended","options":{"headers":{"Authorization":"Bearer-TOKEN-42"},"computesMD5":true}}}"#
        try Data((url.absoluteString + "\t" + line + "\n").utf8).write(to: state.appendingPathComponent("journal"))
        let partial = state.appendingPathComponent("partial/\(DownloadDirectory.legacyKey(for: url)).part")
        try Data(TestContent(name: "old", size: 300_000).bytes(in: 0..<50_000)).write(to: partial)

        let manager = try DownloadManager(configuration: .forTests(directory: temporary.url))
        let receipt = try #require(await manager.allReceipts.first)
        #expect(receipt.url == url.withoutCredentials && receipt.totalBytesWritten == 50_000, "\(receipt)")
        await manager.shutdown()
        let saved = everythingOnDisk()
        let leaked = Self.secrets.filter { saved.contains($0) }
        #expect(leaked.isEmpty, "reached the disk: \(leaked)")
    }
}
