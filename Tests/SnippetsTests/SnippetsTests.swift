import Foundation
import HTTPTestServer
import Snippets
import Testing

@testable import Downloader

/// README.md's Swift snippets: each runs against the test server, and the README shows exactly the compiled text.
@Suite("README snippets")
final class SnippetsTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }

    init() throws {
        workspace = try TestWorkspace(prefix: "snippets")
    }

    @Test("Quick start: verified with the expected SHA-256, named after the URL")
    func quickStart() async throws {
        let url = server.url("/bytes/dataset.tar.gz?size=300000")
        let expected = TestContent(name: "dataset.tar.gz", size: 300_000).sha256.hexString
        let receipt = try await Snippets.quickStart(directory: workspace.directory, url: url, expectedSHA256: expected)
        guard case .checksum(let checksum)? = receipt.verification else {
            Issue.record("not verified: \(String(describing: receipt.verification))")
            return
        }
        #expect(checksum.hexString == expected && receipt.fileURL.lastPathComponent == "dataset.tar.gz")
    }

    @Test("Progress of one download: the watcher ends with the download")
    func oneDownload() async throws {
        let manager = try DownloadManager(configuration: .init(directory: workspace.directory))
        let url = server.url("/bytes/watched?size=400000&rate=2000000")
        try await Snippets.oneDownload(manager: manager, url: url)
        #expect(await manager.receipt(for: url)?.state == .completed)
        await manager.shutdown()
    }

    @Test("Errors: a 404 is caught by kind and fails the download at once")
    func errors() async throws {
        let manager = try DownloadManager(configuration: .init(directory: workspace.directory))
        let url = server.url("/status/404")
        await Snippets.errors(manager: manager, url: url)
        #expect(await manager.receipt(for: url)?.error?.statusCode == 404)
        #expect(server.requests.count == 1, "not retried")
        await manager.shutdown()
    }

    @Test("Resume after a restart: a second manager continues by Range, verified against the first run's checksum")
    func resume() async throws {
        // A short first request, then a window that stalls after 1 MB: the download is unfinished when it stops. (A
        // whole first request would be cut short at the pause and go on without it: `FirstRequestBudget`.)
        let url = server.url("/bytes/resumed?size=3000000&stallAfter=1000000&stall=60&stallCount=2")
        var configuration = DownloadManager.Configuration(directory: workspace.directory)
        configuration.firstRequestBudget = nil
        let first = try DownloadManager(configuration: configuration)
        let expected = Checksum(
            algorithm: .sha256, digest: TestContent(name: "resumed", size: 3_000_000).sha256.bytes)!
        await first.enqueue(url, options: DownloadOptions(checksum: expected))
        #expect(await server.waitUntil { $0.bodyBytesSent >= 1_000_000 + 16_384 })
        await first.suspend(url)
        await first.shutdown()
        let before = server.requests.count
        let receipt = try await Snippets.resume(directory: workspace.directory, url: url)
        #expect(receipt.verification == .checksum(expected), "the first run's checksum was compared")
        let resumed = server.requests.dropFirst(before)
        #expect(resumed.first?.method == "HEAD", "\(resumed.map(\.method))")
        #expect((resumed.first { $0.method == "GET" }?.rangeStart ?? 0) > 0, "by Range: \(resumed.map(\.range))")
        let file = workspace.directory.appendingPathComponent("completed/resumed")
        #expect(MD5.hash(data: try Data(contentsOf: file)) == TestContent(name: "resumed", size: 3_000_000).md5)
    }

    @Test("Callbacks: enqueue, suspend, resume and remove leave nothing behind")
    func callbacks() async throws {
        let manager = try DownloadManager(configuration: .init(directory: workspace.directory))
        let url = server.url("/bytes/cb?size=200000&rate=500000")
        await Snippets.callbacks(manager: manager, url: url)
        await manager.waitUntilQuiet()
        #expect(await manager.receipt(for: url) == nil)
        await manager.shutdown()
    }

    @Test("More control: the exact destination, then forgotten with the file kept")
    func control() async throws {
        let manager = try DownloadManager(configuration: .init(directory: workspace.directory))
        let url = server.url("/bytes/ctl?size=100000")
        let destination = workspace.directory.appendingPathComponent("srv/data/latest.bin")
        let receipt = try await Snippets.control(manager: manager, url: url, destination: destination)
        #expect(receipt.fileURL == destination.standardizedFileURL)
        #expect(await manager.receipt(for: url) == nil)
        #expect(MD5.hash(data: try Data(contentsOf: destination)) == TestContent(name: "ctl", size: 100_000).md5)
        #expect(await manager.maximumActiveDownloads == 8)
        await manager.shutdown()
    }

    @Test("Logins: the credential answers the host's Basic challenge")
    func logins() async throws {
        let manager = try Snippets.logins(directory: workspace.directory, host: "127.0.0.1")
        let receipt = try await manager.download(server.url("/bytes/login?size=50000&auth=alice:s3cret"))
        #expect(receipt.state == .completed)
        await manager.shutdown()
    }

    @Test("Lists of any length: every shard fetched once, and the completed downloads forgotten")
    func lists() async throws {
        let manager = try DownloadManager(configuration: .init(directory: workspace.directory))
        // The test server's deterministic bytes under /bytes/.
        let base = server.url("/bytes/")
        let (done, failed) = await Snippets.lists(manager: manager, base: base, count: 40)
        #expect(done == 40 && failed == 0)
        #expect(await manager.allReceipts.isEmpty)
        let gets = Set(server.requests.filter { $0.method == "GET" }.map(\.path))
        #expect(gets == Set((0..<40).map { "/bytes/shard-\($0).tar" }))
        await manager.shutdown()
    }

    @Test("Using it in a server: an id for routes and the snapshot as the body, then a graceful stop")
    func service() async throws {
        let url = server.url("/bytes/service.iso?size=20000")
        let (id, body) = try await Snippets.server(directory: workspace.directory, url: url)
        let snapshot = try JSONDecoder().decode(DownloadSnapshot.self, from: try #require(body))
        #expect(snapshot.id == id && id.count == 32 && snapshot.url == url)
        // The manager let go of the directory: the next one opens it at once and knows the download by its id.
        let next = try DownloadManager(configuration: .init(directory: workspace.directory))
        #expect(await next.receipt(identifiedBy: id)?.url == url)
        await next.shutdown()
    }

    @Test("README.md and the DocC articles show every compiled snippet, and every Swift block in them is one")
    func readmeMatches() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let source = try String(
            contentsOf: root.appendingPathComponent("Examples/Snippets/Snippets.swift"), encoding: .utf8)
        var regions: [String: (parameters: [String], text: String)] = [:]
        var current: (name: String, parameters: [String], lines: [String], indent: Int)?
        for line in source.components(separatedBy: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed == "// README: end", let region = current {
                regions[region.name] = (region.parameters, region.lines.joined(separator: "\n"))
                current = nil
            } else if trimmed.hasPrefix("// README: ") {
                let words = trimmed.dropFirst("// README: ".count).split(separator: " ", maxSplits: 1)
                let parameters =
                    words.count > 1
                    ? words[1].trimmingCharacters(in: CharacterSet(charactersIn: "()")).components(separatedBy: ", ")
                    : []
                current = (String(words[0]), parameters, [], line.prefix { $0 == " " }.count)
            } else if current != nil {
                current!.lines.append(String(line.dropFirst(min(current!.indent, line.prefix { $0 == " " }.count))))
            }
        }
        #expect(regions.count == 9)

        let articles = root.appendingPathComponent("Sources/Downloader/Downloader.docc")
        let documents =
            [root.appendingPathComponent("README.md")]
            + (try FileManager.default.contentsOfDirectory(at: articles, includingPropertiesForKeys: nil))
            .filter { $0.pathExtension == "md" }
        let blocks = try documents.flatMap { document in
            try String(contentsOf: document, encoding: .utf8).components(separatedBy: "```swift\n").dropFirst().map {
                $0.components(separatedBy: "\n```")[0]
            }
        }
        var shown = Set<String>()
        // A block headed `// Examples/…` quotes a file of an example package whole (`.ci/readme-snippets` compares it).
        for block in blocks where !block.hasPrefix("// Package.swift") && !block.hasPrefix("// Examples/") {
            // The README adds imports and one `let` per parameter of the region; the rest must be the region.
            let match = regions.first { region in
                var lines = block.components(separatedBy: "\n")[...]
                while let first = lines.first,
                    first.isEmpty || first.hasPrefix("import ")
                        || region.value.parameters.contains(where: { first.hasPrefix("let \($0) = ") })
                {
                    lines = lines.dropFirst()
                }
                return lines.joined(separator: "\n") == region.value.text
            }
            #expect(match != nil, "this README block is not compiled anywhere:\n\(block)")
            if let match { shown.insert(match.key) }
        }
        #expect(shown == Set(regions.keys), "regions missing from the README: \(Set(regions.keys).subtracting(shown))")
    }
}
