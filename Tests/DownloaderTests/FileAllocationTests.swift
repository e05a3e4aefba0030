import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Issue #36: `Configuration.fileAllocation` reserves a file's blocks once its length is known, without changing
/// the partial file's length (a resume reads it).
@Suite("File allocation")
final class FileAllocationTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }

    init() throws {
        workspace = try TestWorkspace()
    }

    /// The partial file's length and allocated bytes while the server holds the response after 200,000 bytes.
    func heldPartial(_ allocation: FileAllocation) async throws -> (size: Int64, allocated: Int64) {
        let folder = workspace.directory.appendingPathComponent(allocation.rawValue)
        // The stall and the manager's wait before a retry outlast any deadline here (with the suite's 10 s, a loaded
        // machine retried and finished the file before the test looked at the partial one).
        var configuration = DownloadManager.Configuration.forTests(directory: folder, stallTimeout: 900)
        configuration.fileAllocation = allocation
        let manager = try DownloadManager(configuration: configuration)
        let url = server.url(
            "/bytes/alloc-\(allocation.rawValue)?size=8000000&stallAfter=200000&stall=600&stallCount=1&stallReached=1")
        await manager.enqueue(url)
        // A deadline, not a delay: in the full suite a request can wait long for the process's one libcurl queue
        // (a loaded CI run saw no response within 60 s).
        let deadline = TestTime.deadline(in: .seconds(300))
        while await (manager.receipt(for: url)?.totalBytesWritten ?? 0) < 65_536, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let receipt = try #require(await manager.receipt(for: url))
        var info = stat()
        #expect(
            stat(receipt.fileURL.path, &info) == 0,
            "\(receipt.state), \(receipt.totalBytesWritten) bytes, requests: \(server.statistics.requests.count)")
        await manager.remove(url)
        await manager.shutdown()
        return (Int64(info.st_size), Int64(info.st_blocks) * 512)
    }

    @Test("falloc reserves the whole file and keeps the partial file's length; none reserves nothing")
    func reserves() async throws {
        let reserved = try await heldPartial(.falloc)
        #expect(reserved.size < 8_000_000 && reserved.allocated >= 8_000_000, "\(reserved)")
        let plain = try await heldPartial(.none)
        #expect(plain.allocated < 8_000_000, "\(plain)")
    }
}
