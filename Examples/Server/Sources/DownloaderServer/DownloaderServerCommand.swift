import ArgumentParser
import Foundation
import Logging
import Metrics
import Prometheus
import ServiceLifecycle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `downloader-server`: downloads into a folder, driven by aria2's JSON-RPC and shown on a page.
@main
struct DownloaderServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "downloader-server",
        abstract: "Downloads into DIR, driven by aria2's JSON-RPC (/jsonrpc over HTTP or WebSocket), shown at /.",
        discussion: """
            Stops gracefully on SIGTERM or SIGINT: downloads are suspended and saved, and continue at the next start.
            The secret is read from --rpc-secret, --rpc-secret-file or DOWNLOADER_RPC_SECRET, in that order; the
            flag's value is blanked from the process list once read. /healthz answers without it; /metrics and
            /api/downloads take it as `Authorization: Bearer SECRET`, the page as /#token=SECRET.
            """)

    @Option(help: "Listen on this port (aria2's 6800; 0 picks a free one).")
    var port = 6800

    @Option(help: "Listen on this address (0.0.0.0: every interface; give a secret then).")
    var host = "127.0.0.1"

    @Option(name: .customLong("dir"), help: "Where files land; the state lives in DIR/.downloader.")
    var directory = FileManager.default.currentDirectoryPath

    @Option(name: .customLong("rpc-secret"), help: "Every RPC call must pass \"token:SECRET\" first.")
    var secret: String?

    @Option(name: .customLong("rpc-secret-file"), help: "Read the secret from the first line of this file.")
    var secretFile: String?

    @Flag(
        name: .customLong("rpc-allow-origin-all"),
        help: "Let web pages of any origin call (CORS, JSONP); by default another origin's page is refused.")
    var allowsEveryOrigin = false

    @Option(
        name: [.customShort("j"), .customLong("max-concurrent-downloads")],
        help: "Downloads at once (aria2.changeGlobalOption changes it).")
    var maximumActiveDownloads = 4

    @Flag(name: .customLong("no-continue"), help: "Leave downloads a stop interrupted paused at start.")
    var noContinue = false

    @Option(
        name: .customLong("rpc-max-request-size"),
        help: "The largest request body or WebSocket message in bytes; a larger one gets 413 unread.")
    var maximumRequestSize = 2 << 20

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port takes a number from 0 to 65535") }
        guard maximumActiveDownloads >= 1 else { throw ValidationError("-j takes a positive number") }
        guard maximumRequestSize >= 1024 else { throw ValidationError("--rpc-max-request-size takes 1024 or more") }
        guard secret == nil || secretFile == nil else {
            throw ValidationError("give the secret once: --rpc-secret or --rpc-secret-file")
        }
    }

    /// The options, with the secret read from where it was given.
    func options(environment: [String: String]) throws -> ServerOptions {
        var options = ServerOptions()
        options.port = port
        options.host = host
        options.directory = URL(fileURLWithPath: directory).standardizedFileURL
        options.maximumActiveDownloads = maximumActiveDownloads
        options.continuesInterrupted = !noContinue
        options.allowsEveryOrigin = allowsEveryOrigin
        options.maximumRequestSize = maximumRequestSize
        if let secret {
            options.secret = secret
        } else if let secretFile {
            guard let text = try? String(contentsOfFile: secretFile, encoding: .utf8) else {
                throw ValidationError("cannot read the secret file \(secretFile)")
            }
            options.secret = text.split(whereSeparator: \.isNewline).first.map(String.init)
        } else {
            options.secret = environment["DOWNLOADER_RPC_SECRET"]
        }
        if options.secret?.isEmpty == true { options.secret = nil }
        return options
    }

    func run() async throws {
        let options = try options(environment: ProcessInfo.processInfo.environment)
        Self.blankSecretInCommandLine()
        LoggingSystem.bootstrap(StreamLogHandler.standardError)
        var logger = Logger(label: "downloader-server")
        logger.logLevel =
            ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        if options.secret == nil && !options.listensOnLoopbackOnly {
            logger.warning(
                "listening on \(options.host) without a secret: anyone who reaches the port can add downloads",
                metadata: ["hint": "give --rpc-secret-file or DOWNLOADER_RPC_SECRET"])
        }
        // swift-metrics' requests and durations (Hummingbird's MetricsMiddleware) land where /metrics reads.
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let service = try await buildApplication(options, registry: registry, logger: logger)
        let group = ServiceGroup(
            configuration: .init(
                services: service.services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    /// Overwrites `--rpc-secret`'s value in the process's own `argv` with `*`, as curl does with passwords, so
    /// that `ps` and `/proc/PID/cmdline` show it blanked for the rest of the run.
    static func blankSecretInCommandLine() {
        let count = Int(CommandLine.argc)
        let argv = CommandLine.unsafeArgv
        var index = 1
        while index < count, let pointer = argv[index] {
            let text = String(cString: pointer)
            if text == "--" { break }
            if text == "--rpc-secret", index + 1 < count, let value = argv[index + 1] {
                blank(value, from: 0)
                index += 1
            } else if text.hasPrefix("--rpc-secret=") {
                blank(pointer, from: "--rpc-secret=".utf8.count)
            }
            index += 1
        }
    }

    private static func blank(_ pointer: UnsafeMutablePointer<CChar>, from offset: Int) {
        var index = offset
        while pointer[index] != 0 {
            pointer[index] = CChar(UInt8(ascii: "*"))
            index += 1
        }
    }
}
