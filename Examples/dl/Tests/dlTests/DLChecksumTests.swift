import Downloader
import Foundation
import HTTPTestServer
import Testing

@Suite("dl checksums")
final class DLChecksumTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var work: URL { workspace.directory }

    init() throws {
        workspace = try TestWorkspace(prefix: "dl-checksum")
    }

    var dir: URL { work.appendingPathComponent("out") }

    /// Writes the contents the server serves for `names` into a folder and runs a real checksum tool on them there.
    func checksumFile(_ tool: String, _ names: [String: Int], arguments: [String] = []) throws -> URL {
        let source = work.appendingPathComponent("source-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: source, withIntermediateDirectories: true)
        for (name, size) in names {
            try TestContent(name: name, size: size).data.write(to: source.appendingPathComponent(name))
        }
        let process = try SpawnedProcess(
            executable: URL(fileURLWithPath: tool), arguments: arguments + names.keys.sorted(),
            environment: ProcessInfo.processInfo.environment, directory: source)
        _ = process.waitUntilExit()
        let output = process.output.stdout
        let list = work.appendingPathComponent(
            "\(URL(fileURLWithPath: tool).lastPathComponent)-\(UUID().uuidString).txt")
        try output.write(to: list)
        return list
    }

    @Test(
        "--checksum-file with real sha256sum output (and its --tag form) verifies every URL by its file name",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sha256sum")),
        arguments: [[], ["--tag"]])
    func sha256sumFile(tagArguments: [String]) async throws {
        let files = ["alpha.iso": 300_000, "beta.tar.gz": 50_000]
        let list = try checksumFile("/usr/bin/sha256sum", files, arguments: tagArguments)
        let urls = files.keys.sorted().map { server.url("/bytes/\($0)?size=\(files[$0]!)").absoluteString }
        let outcome = try await DLProcess.run(["--dir", dir.path, "--checksum-file", list.path] + urls, in: work)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(outcome.lines.count == 2)
        #expect(outcome.stderr.components(separatedBy: "verified sha-256=").count == 3, "\(outcome.stderr)")
    }

    @Test("A wrong line fails its URL (exit 1) and the others still complete; a URL with no line is a usage error")
    func wrongAndMissingLines() async throws {
        let list = work.appendingPathComponent("SHA256SUMS")
        let good = TestContent(name: "good.bin", size: 2000).sha256.hexString
        try Data("\(good)  good.bin\n\(String(repeating: "0", count: 64)) *bad.bin\n".utf8).write(to: list)
        let good1 = server.url("/bytes/good.bin?size=2000").absoluteString
        let bad = server.url("/bytes/bad.bin?size=2000").absoluteString
        let other = server.url("/bytes/other.bin?size=100").absoluteString
        let outcome = try await DLProcess.run(["--dir", dir.path, "--checksum-file", list.path, good1, bad], in: work)
        #expect(outcome.status == 1 && outcome.lines == [dir.appendingPathComponent("good.bin").path])
        #expect(outcome.stderr.contains("dl: \(bad): SHA256 is"), "\(outcome.stderr)")

        let missing = try await DLProcess.run(["--dir", dir.path, "--checksum-file", list.path, other], in: work)
        #expect(missing.status == 2 && missing.stderr.contains("no checksum for other.bin"))
        let optional = try await DLProcess.run(
            ["--dir", dir.path, "--checksum-file", list.path, "--checksum-optional", other], in: work)
        #expect(optional.status == 0 && optional.stderr.contains("computed md5="), "\(optional.stderr)")
    }

    @Test("--checksum takes what people paste; a wrong one fails after one clean restart")
    func checksumFlag() async throws {
        let url = server.url("/bytes/one.bin?size=100000")
        let sha = TestContent(name: "one.bin", size: 100_000).sha256.hexString
        for form in ["sha-256=\(sha)", "sha256:\(sha.uppercased())", sha] {
            try? FileManager.default.removeItem(at: dir)
            let outcome = try await DLProcess.run(
                ["--dir", dir.path, "--checksum", form, url.absoluteString], in: work)
            #expect(
                outcome.status == 0 && outcome.stderr.contains("verified sha-256=\(sha)"), "\(form): \(outcome.stderr)")
        }
        let wrong = try await DLProcess.run(
            [
                "--dir", work.appendingPathComponent("w").path, "--checksum",
                "sha-1=" + String(repeating: "1", count: 40),
                url.absoluteString,
            ], in: work)
        #expect(wrong.status == 1 && wrong.stderr.contains("SHA1 is"))
    }

    @Test(
        "Bad checksum arguments are usage errors",
        arguments: [
            ["--checksum", "sha-256=xyz", "http://127.0.0.1:1/a"], ["--checksum", "crc=00", "http://127.0.0.1:1/a"],
            ["--checksum", String(repeating: "a", count: 32), "http://127.0.0.1:1/a", "http://127.0.0.1:1/b"],
            [
                "--md5", String(repeating: "a", count: 32), "--checksum", String(repeating: "a", count: 32),
                "http://127.0.0.1:1/a",
            ],
            ["--checksum-file", "/nonexistent/list", "http://127.0.0.1:1/a"],
        ])
    func usageErrors(arguments: [String]) async throws {
        let outcome = try await DLProcess.run(arguments, in: work)
        #expect(outcome.status == 2 && outcome.stderr.hasPrefix("dl: "), "\(outcome.stderr)")
    }
}
