import Aria2RPC
import Downloader
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import ServiceLifecycle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

let options: ServerOptions
do {
    guard let parsed = try ServerOptions.parse(Array(CommandLine.arguments.dropFirst())) else {
        print(ServerOptions.usage)
        exit(0)
    }
    options = parsed
} catch {
    FileHandle.standardError.write(Data("downloader-server: \(error.message)\n\(ServerOptions.usage)\n".utf8))
    exit(2)
}

LoggingSystem.bootstrap(StreamLogHandler.standardError)
var logger = Logger(label: "downloader-server")
logger.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info

var configuration = DownloadManager.Configuration(directory: options.directory)
configuration.completedDirectory = options.directory  // files land in DIR itself, as with aria2's --dir
configuration.maximumActiveDownloads = options.maximumActiveDownloads
configuration.continuesInterruptedDownloads = options.continuesInterrupted
configuration.directoryLockTimeout = 10  // a previous process may still be saving
let managerLogger = logger
configuration.log = { managerLogger.log($0) }

do {
    let manager = try await DownloadManager.make(configuration: configuration)
    let session = Aria2Session(
        manager: manager, directory: options.directory, secret: options.secret,
        requestShutdown: { kill(getpid(), SIGTERM) })  // the same graceful path as a signal
    let app = Application(
        router: Routes.router(
            session: session, manager: manager, secret: options.secret, allowsEveryOrigin: options.allowsEveryOrigin,
            host: options.host),
        // Idle and half-open connections end after 30 s (nothing read or written); at most `connectionLimit` at once,
        // below the descriptor limit with a reserve for the downloads' sockets and files, so a flood waits in the
        // backlog instead of taking the process to EMFILE.
        server: .http1(configuration: .init(idleTimeout: .seconds(30))),
        configuration: .init(
            address: .hostname(options.host, port: options.port), serverName: "downloader-server",
            availableConnectionsDelegate: MaximumAvailableConnections(ServerLimits.connectionLimit(), logger: logger)),
        onServerRunning: { channel in
            // Scripts started with --port 0 read the port from this line.
            let port = channel.localAddress?.port ?? options.port
            FileHandle.standardOutput.write(
                Data("downloader-server listening on http://\(options.host):\(port)/\n".utf8))
        },
        logger: logger)
    // Shut down in reverse order: the downloads are suspended and saved first, then the HTTP server stops.
    let group = ServiceGroup(
        configuration: .init(
            services: [app, DownloadService(manager: manager)], gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
    try await group.run()
} catch {
    logger.critical("downloader-server stops: \(error)")
    exit(1)
}
