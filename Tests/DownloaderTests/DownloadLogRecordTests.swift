import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// The logging hook (issue #35): what the manager decides, as records a swift-log user forwards in a few lines.
@Suite("Configuration.log")
final class DownloadLogRecordTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var directory: URL { workspace.directory.appendingPathComponent("manager") }

    init() throws {
        workspace = try TestWorkspace()
    }

    @Test("A retry, a completion and a failure are logged with levels and metadata; no credential, no progress")
    func records() async throws {
        let records = Locked<[DownloadLogRecord]>([])
        var configuration = DownloadManager.Configuration.forTests(directory: directory, retryLimit: 2)
        configuration.log = { record in records.withLock { $0.append(record) } }
        let manager = try DownloadManager(configuration: configuration)
        let flaky = server.url("/bytes/logged?size=3000&status=503&statusCount=1")
        let receipt = try await manager.download(flaky)
        var missing = URLComponents(url: server.url("/status/404?log=1"), resolvingAgainstBaseURL: false)!
        missing.user = "me"
        missing.password = "hunter2"
        await #expect(throws: DownloadError.httpStatus) { try await manager.download(missing.url!) }
        await manager.shutdown()

        let logged = records.withLock { $0 }
        let retry = try #require(logged.first { $0.level == .warning && $0.metadata["attempt"] != nil })
        #expect(retry.metadata["attempt"] == "1" && retry.metadata["error"] == "httpStatus")
        #expect(retry.metadata["status"] == "503" && retry.metadata["id"] == receipt.identifier)
        #expect(retry.message.hasPrefix("retrying in "), "\(retry.message)")
        let done = try #require(logged.first { $0.level == .notice })
        #expect(done.metadata["state"] == "completed" && done.metadata["bytes"] == "3000")
        #expect(done.metadata["url"] == flaky.absoluteString)
        let failed = try #require(logged.first { $0.level == .error })
        #expect(failed.metadata["error"] == "httpStatus" && failed.metadata["status"] == "404")
        #expect(logged.contains { $0.level == .info && $0.message == "downloading" })
        let everything = logged.map { "\($0.message) \($0.metadata)" }.joined(separator: "\n")
        #expect(!everything.contains("hunter2"), "\(everything)")
        // State changes, retries and failures only: a record per progress report would flood a log.
        #expect(logged.count < 20, "\(everything)")
    }

    @Test("A restart from byte 0 is logged with its reason (the server has another version now)")
    func restartLogged() async throws {
        let records = Locked<[DownloadLogRecord]>([])
        var configuration = DownloadManager.Configuration.forTests(directory: directory)
        configuration.log = { record in records.withLock { $0.append(record) } }
        let manager = try DownloadManager(configuration: configuration)
        // The first GET stops after 100,000 bytes; every later request sees a new version.
        let url = server.url(
            "/bytes/restarted?size=300000&stallAfter=100000&stall=60&stallCount=1&stallReached=1&changeAt=1")
        await manager.enqueue(url)
        let deadline = TestTime.deadline(in: .seconds(60))
        while await (manager.receipt(for: url)?.totalBytesWritten ?? 0) < 65_536, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        await manager.suspend(url)
        await manager.resume(url)
        let receipt = try await manager.download(url)
        #expect(receipt.state == .completed)
        await manager.shutdown()
        let logged = records.withLock { $0 }
        let restart = logged.first { $0.level == .warning && $0.message.contains("byte 0") }
        #expect(restart != nil, "\(logged.map(\.message))")
        #expect(restart?.metadata["id"] == receipt.identifier)
    }
}
