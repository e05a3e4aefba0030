import Downloader
import Foundation
import HTTPTestServer
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Issue #22 through the built `dl`: a planted state folder, names that try to write to the terminal, a closed
/// stdout, a closed session (SIGHUP), and the same command run twice.
@Suite("dl trust")
final class DLTrustTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var work: URL { workspace.directory }
    var dir: URL { work.appendingPathComponent("out") }

    init() throws {
        workspace = try TestWorkspace(prefix: "dl-trust")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    func md5(_ path: String) throws -> String {
        MD5.hash(data: try Data(contentsOf: URL(fileURLWithPath: path))).hexString
    }

    @Test("A .dl planted as a symbolic link is a clear error naming it; the folder it points to is untouched")
    func symlinkedStateFolder() async throws {
        let other = work.appendingPathComponent("other")
        try FileManager.default.createDirectory(
            at: other.appendingPathComponent("partial"), withIntermediateDirectories: true)
        try Data("someone's journal".utf8).write(to: other.appendingPathComponent("journal"))
        try Data("notes".utf8).write(to: other.appendingPathComponent("partial/notes.txt"))
        try FileManager.default.createSymbolicLink(at: dir.appendingPathComponent(".dl"), withDestinationURL: other)
        let outcome = try await DLProcess.run(
            ["-P", dir.path, server.url("/bytes/a?size=1000").absoluteString], in: work)
        #expect(outcome.status == 1)
        #expect(outcome.stderr.contains(".dl") && outcome.stderr.contains("symbolic link"), "\(outcome.stderr)")
        #expect(try String(contentsOf: other.appendingPathComponent("journal"), encoding: .utf8) == "someone's journal")
        #expect(try String(contentsOf: other.appendingPathComponent("partial/notes.txt"), encoding: .utf8) == "notes")
        #expect(
            (try? FileManager.default.contentsOfDirectory(atPath: other.path))?.sorted() == ["journal", "partial"])
    }

    @Test("Names and URLs with control characters are printed escaped: no raw newline or escape reaches the screen")
    func controlCharactersEscaped() async throws {
        // The last path component decodes to "a\nb\u{1B}[31mRED.txt".
        let hostile = server.url("/bytes/a%0ab%1b%5b31mRED.txt?size=300000&stallAfter=100000&stall=60&stallCount=2")
        let first = try DLProcess(["-P", dir.path, hostile.absoluteString], in: work)
        #expect(await server.waitUntil { $0.bodyBytesSent >= 100_000 })
        first.send(SIGTERM)
        let stopped = await first.wait()
        let listing = try await DLProcess.run(["--list", "-P", dir.path], in: work)
        let failing = server.url("/bytes/c%0ad%1b%5b2J.txt?status=404")
        let failed = try await DLProcess.run(["-P", dir.path, failing.absoluteString], in: work)
        for output in [stopped.stderr, listing.stdout, listing.stderr, failed.stderr] {
            #expect(!output.contains("\u{1B}"), "a raw escape: \(output)")
            for line in output.split(separator: "\n") where !line.isEmpty {
                #expect(line.hasPrefix("dl: ") || line.contains("\t"), "a line broken by a raw newline: \(line)")
            }
        }
        #expect(stopped.stderr.contains("a\\nb\\x1B[31mRED.txt"), "\(stopped.stderr)")
    }

    @Test("A closed stdout does not kill the run: every download finishes and the state is cleaned up")
    func closedStdout() async throws {
        // The second and third responses wait at a gate that the test opens only after it has closed its end of
        // dl's stdout, so their paths are printed into a closed pipe.
        let urls = [
            server.url("/bytes/p1?size=1000"), server.url("/bytes/p2?size=1000&gate=pipe&gateSize=3"),
            server.url("/bytes/p3?size=1000&gate=pipe&gateSize=3"),
        ]
        let process = Process()
        process.executableURL = DLProcess.binary
        process.arguments = ["-P", dir.path] + urls.map(\.absoluteString)
        process.currentDirectoryURL = work
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let firstLine = await RawHTTPClient.onThread { () -> String in
            var text = ""
            while !text.contains("\n"), let data = try? output.fileHandleForReading.read(upToCount: 1), !data.isEmpty {
                text += String(decoding: data, as: UTF8.self)
            }
            return text
        }
        #expect(firstLine == dir.appendingPathComponent("p1").path + "\n")
        try output.fileHandleForReading.close()  // like `| head -n 1`
        // The third arrival opens the gate.
        #expect(await server.waitUntil { $0.requests.filter { $0.path.hasPrefix("/bytes/p") }.count >= 3 })
        let port = server.port
        let reply = await RawHTTPClient.onThread {
            try? RawHTTPClient(port: port).send("GET", "/bytes/p4?size=10&gate=pipe&gateSize=3")
        }
        #expect(reply?.status == 200)
        await RawHTTPClient.onThread { process.waitUntilExit() }
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationReason == .exit && process.terminationStatus == 0, "\(stderr)")
        for name in ["p1", "p2", "p3"] {
            #expect(try md5(dir.appendingPathComponent(name).path) == TestContent(name: name, size: 1000).md5.hexString)
        }
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent(".dl").path))
    }

    @Test("SIGHUP (a closed session) saves the state and exits 129; the same command resumes")
    func hangUp() async throws {
        let url = server.url("/bytes/hup?size=400000&stallAfter=200000&stall=300&stallCount=2")
        // -T 300: a starved test runner may signal late; dl must not retry the stall (and finish) before it.
        let first = try DLProcess(
            ["-P", dir.path, "-T", "300", url.absoluteString], in: work, environment: DLProcess.patientStop)
        #expect(await server.waitUntil { $0.bodyBytesSent >= 200_000 })
        first.send(SIGHUP)
        let outcome = await first.wait()
        #expect(outcome.status == 129, "\(outcome.stderr)")
        #expect(outcome.stderr.contains("state saved"), "\(outcome.stderr)")
        let again = try await DLProcess.run(["-P", dir.path, url.absoluteString], in: work)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try md5(again.lines.first ?? "") == TestContent(name: "hup", size: 400_000).md5.hexString)
        #expect((server.requests.filter { $0.method == "GET" }.last?.rangeStart ?? 0) > 0, "resumed by Range")
    }

    @Test("The same command run again after a success costs one HEAD, no GET, and prints the same path")
    func rerunAfterSuccess() async throws {
        let url = server.url("/bytes/again.iso?size=300000")
        let first = try await DLProcess.run(["-P", dir.path, url.absoluteString], in: work)
        #expect(first.status == 0, "\(first.stderr)")
        let before = server.requests.count
        let second = try await DLProcess.run(["-P", dir.path, url.absoluteString], in: work)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.lines == first.lines)
        let requests = server.requests.dropFirst(before)
        #expect(requests.map(\.method) == ["HEAD"], "\(requests.map { "\($0.method) \($0.range ?? "")" })")
        #expect(try md5(second.lines.first ?? "") == TestContent(name: "again.iso", size: 300_000).md5.hexString)
        #expect(
            (try? FileManager.default.contentsOfDirectory(atPath: dir.path))?.sorted() == ["again.iso"],
            "no second copy, no state left")
    }

    @Test("A rerun after the resource changed downloads the new version and replaces the file once verified")
    func rerunAfterChange() async throws {
        // A new version with every GET: the HEAD before the second run shows version 1.
        let url = server.url("/bytes/moving.iso?size=300000&change=2")
        let first = try await DLProcess.run(["-P", dir.path, url.absoluteString], in: work)
        #expect(first.status == 0, "\(first.stderr)")
        let second = try await DLProcess.run(["-P", dir.path, url.absoluteString], in: work)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.lines == first.lines)
        let path = try #require(second.lines.first)
        #expect(try md5(path) == TestContent(name: "moving.iso", size: 300_000, version: 1).md5.hexString)
        #expect((try? FileManager.default.contentsOfDirectory(atPath: dir.path))?.sorted() == ["moving.iso"])
    }
}
