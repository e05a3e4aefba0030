import Aria2RPC
import Downloader
import Foundation

/// A manager in a folder of its own and a session over it, for each test (the folder goes with the test).
/// Downloads point at closed or silent loopback ports: nothing leaves the machine.
struct Fixture {
    let directory: URL
    let manager: DownloadManager
    let session: Aria2Session

    init(name: String, secret: String?) async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)")
        var configuration = DownloadManager.Configuration(directory: directory)
        configuration.completedDirectory = directory
        configuration.retryLimit = 0
        manager = try await DownloadManager.make(configuration: configuration)
        session = Aria2Session(manager: manager, directory: directory, secret: secret, requestShutdown: {})
    }

    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}
