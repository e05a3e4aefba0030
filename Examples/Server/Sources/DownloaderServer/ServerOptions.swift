import Foundation

/// What the service is started with: the command line (`DownloaderServerCommand`) fills one, a test makes its own;
/// `buildApplication(_:logger:)` reads nothing else.
struct ServerOptions: Sendable {
    var port = 6800
    var host = "127.0.0.1"
    var directory = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
    /// The RPC secret, from `--rpc-secret`, `--rpc-secret-file` or `DOWNLOADER_RPC_SECRET`; `nil`: none.
    var secret: String?
    var maximumActiveDownloads = 4
    var continuesInterrupted = true
    var allowsEveryOrigin = false
    /// The largest request body (and WebSocket message) read; a larger one is refused with 413 before it is read.
    var maximumRequestSize = 2 << 20
    /// How long a new connection has to send its first request head whole (slowloris).
    var firstRequestDeadline = Duration.seconds(10)

    /// Whether the service listens on a loopback address only (then without a secret only this machine can call).
    var listensOnLoopbackOnly: Bool {
        ["localhost", "::1", "[::1]"].contains(host.lowercased()) || host.hasPrefix("127.")
    }

    /// The command line's options as aria2 names them, for `aria2.getGlobalOption`.
    var aria2GlobalOptions: [String: String] {
        [
            "rpc-listen-port": String(port), "rpc-listen-all": listensOnLoopbackOnly ? "false" : "true",
            "rpc-allow-origin-all": allowsEveryOrigin ? "true" : "false", "continue": "true",
            "rpc-max-request-size": String(maximumRequestSize), "enable-rpc": "true",
        ]
    }
}
