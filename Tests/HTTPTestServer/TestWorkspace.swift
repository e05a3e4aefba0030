import Foundation

/// What most tests need: a running server and a fresh temporary directory, both gone when the workspace is.
public final class TestWorkspace: Sendable {
    /// The server, on 127.0.0.1 at a free port.
    public let server: HTTPTestServer
    /// A new empty directory.
    public let directory: URL

    /// Starts a server and creates a directory named `prefix-UUID` in the temporary directory.
    public init(prefix: String = "downloader-tests") throws {
        server = try HTTPTestServer()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit {
        server.stopInBackground()
        try? FileManager.default.removeItem(at: directory)
    }
}
