import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Issue #22: "verified" means the bytes on disk. A partial file or a saved state changed between two runs (by a
/// person, a tool, or a power loss) ends as the right file or a clear error, never as a wrong file called verified.
extension TransferTests {
    /// Runs a transfer that a dropped connection stops at `offset`, leaving a partial file and its saved state.
    func interrupted(_ path: String, window: Int64 = 256 << 10, connections: Int = 1) async throws {
        var configuration = Transfer.Configuration(
            windowSize: window, maximumWindowSize: window, firstWindowSize: 16 << 10, firstRequestBudget: nil)
        configuration.minimumSegmentSize = 256 << 10
        let outcome = await runTransfer(
            Transfer(
                url: server.url(path), options: DownloadOptions(connections: connections), directory: directory,
                bridge: bridge, configuration: configuration))
        guard case .failure(let error) = outcome, error == .connectionFailed else {
            Issue.record("the dropped connection should stop the first run: \(outcome)")
            return
        }
    }

    func rerun(
        _ path: String, checksum: Checksum? = nil, window: Int64 = 256 << 10, connections: Int = 1,
        warnings: Locked<[String]> = .init([])
    ) async -> Result<TransferResult, DownloadError> {
        var configuration = Transfer.Configuration(
            windowSize: window, maximumWindowSize: window, firstWindowSize: 16 << 10, firstRequestBudget: nil)
        configuration.minimumSegmentSize = 256 << 10
        return await runTransfer(
            Transfer(
                url: server.url(path), options: DownloadOptions(checksum: checksum, connections: connections),
                directory: directory, bridge: bridge, configuration: configuration,
                warn: { warning in warnings.withLock { $0.append(warning) } }))
    }

    /// Changes one byte of a file in place, keeping its length.
    func flipByte(of file: URL, at offset: UInt64) throws {
        let handle = try FileHandle(forUpdating: file)
        defer { try? handle.close() }
        try handle.seek(toOffset: offset)
        let byte = try #require(try handle.read(upToCount: 1)?.first)
        try handle.seek(toOffset: offset)
        try handle.write(contentsOf: [byte ^ 0xff])
    }

    /// Rewrites the saved state's JSON (the whole file, or its `state` object when the file carries a checksum),
    /// leaving any checksum as it was: what a person editing the file would do.
    func editState(of url: URL, _ edit: (inout [String: Any]) -> Void) throws {
        let file = directory.stateFile(for: url)
        let text = try String(contentsOf: file, encoding: .utf8)
        let data = Data(text.utf8)
        var outer = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        if var inner = outer["state"] as? [String: Any] {
            edit(&inner)
            outer["state"] = inner
        } else {
            edit(&outer)
        }
        try JSONSerialization.data(withJSONObject: outer, options: [.sortedKeys]).write(to: file)
    }

    /// The right file, or a clear error: never a wrong file (or a wrong digest) reported as a success.
    func expectRightOrError(_ outcome: Result<TransferResult, DownloadError>, _ content: TestContent) throws {
        guard case .success(let result) = outcome else { return }
        #expect(try md5OfFile(result.fileURL) == content.md5, "a wrong file was delivered as a success")
        if let md5 = result.md5 { #expect(md5 == content.md5, "a wrong digest was reported") }
    }

    @Test(
        "A byte changed in the hashed part of a partial file between runs: the rerun delivers the right file",
        arguments: [false, true])
    func changedHashedByte(expectingChecksum: Bool) async throws {
        let name = "flip\(expectingChecksum)"
        let path = "/bytes/\(name)?size=2000000&dropAt=1200000"
        let content = TestContent(name: name, size: 2_000_000)
        try await interrupted(path)
        let partial = directory.partialFile(for: server.url(path))
        #expect((fileSize(partial) ?? 0) > 500_000)
        try flipByte(of: partial, at: 300_000)
        let checksum = expectingChecksum ? Checksum(algorithm: .md5, digest: content.md5.bytes) : nil
        let outcome = await rerun(path, checksum: checksum)
        let result = try outcome.get()
        #expect(try md5OfFile(result.fileURL) == content.md5)
        #expect(result.md5 == content.md5)
    }

    @Test("A partial file touched but not changed is hashed again from disk and resumed, not fetched again")
    func touchedPartialResumes() async throws {
        let path = "/bytes/touched?size=2000000&dropAt=1200000"
        let content = TestContent(name: "touched", size: 2_000_000)
        try await interrupted(path)
        let partial = directory.partialFile(for: server.url(path))
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSince1970: 1)], ofItemAtPath: partial.path)
        let result = try await rerun(path).get()
        #expect(try md5OfFile(result.fileURL) == content.md5 && result.md5 == content.md5)
        #expect(result.resumedBytes > 500_000, "the bytes on disk were used")
    }

    @Test("A saved state whose hashed length was changed is discarded with a warning; the file and digest are right")
    func changedHashedLength() async throws {
        let path = "/bytes/hashlen?size=2000000&dropAt=1200000"
        let content = TestContent(name: "hashlen", size: 2_000_000)
        try await interrupted(path)
        try editState(of: server.url(path)) { state in
            state["hashedLength"] = ((state["hashedLength"] as? Int) ?? 0) / 2
        }
        let warnings = Locked<[String]>([])
        let outcome = await rerun(path, warnings: warnings)
        try expectRightOrError(outcome, content)
        #expect(throws: Never.self) { try outcome.get() }
        #expect(warnings.withLock { $0 }.contains { $0.contains("saved state") }, "\(warnings.withLock { $0 })")
    }

    @Test("A segment list that claims bytes never written is caught: the right file or a clear error")
    func lyingSegmentList() async throws {
        let size = 4 << 20
        let path = "/bytes/seglie?size=\(size)&dropAt=\(3 << 20)"
        let content = TestContent(name: "seglie", size: size)
        try await interrupted(path, window: 16 << 20, connections: 4)
        try editState(of: server.url(path)) { state in
            let hashed = (state["hashedLength"] as? Int) ?? 0
            var segments = (state["segments"] as? [[Int]]) ?? []
            // Claim that everything from the hashed bytes to the end of the first listed segment (or 100 000 more
            // bytes) is on disk: a gap the file does not have.
            if let first = segments.first, first[0] > hashed {
                segments[0] = [hashed, first[1]]
            } else {
                segments.insert([hashed, min(size, hashed + 100_000)], at: 0)
            }
            state["segments"] = segments
        }
        let outcome = await rerun(path, window: 16 << 20, connections: 4)
        try expectRightOrError(outcome, content)
    }
}
