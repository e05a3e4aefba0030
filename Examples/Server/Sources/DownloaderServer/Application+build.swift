import Aria2RPC
import Downloader
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import Prometheus
import ServiceLifecycle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a started service is made of: what its `ServiceGroup` runs, in order.
struct BuiltService {
    /// The HTTP server, then the manager: a graceful shutdown stops them in reverse, so the downloads are suspended
    /// and saved first (the part a restart depends on), then the server.
    let services: [any Service]
    let manager: DownloadManager
    let session: Aria2Session
}

/// Builds the service for `options`: its manager, its aria2 session, its routes and its server.
/// - Parameters:
///   - options: the command line's choices.
///   - registry: where `/metrics` reads from (and swift-metrics' factory writes to, when it was bootstrapped).
///   - logger: the service's logger.
/// - Returns: the services to run.
/// - Throws: when the folder cannot be used (another process holds it, no permission).
func buildApplication(
    _ options: ServerOptions, registry: PrometheusCollectorRegistry, logger: Logger
) async throws -> BuiltService {
    var configuration = DownloadManager.Configuration(directory: options.directory)
    configuration.completedDirectory = options.directory  // files land in DIR itself, as with aria2's --dir
    configuration.maximumActiveDownloads = options.maximumActiveDownloads
    configuration.continuesInterruptedDownloads = options.continuesInterrupted
    configuration.directoryLockTimeout = 10  // a previous process may still be saving
    let managerLogger = logger
    configuration.log = { managerLogger.log($0) }
    let manager = try await DownloadManager.make(configuration: configuration)
    let session = Aria2Session(
        manager: manager, directory: options.directory, secret: options.secret,
        globalOptions: options.aria2GlobalOptions, logger: logger,
        requestShutdown: { kill(getpid(), SIGTERM) })  // the same graceful path as a signal
    let metrics = ServerMetrics(registry: registry)
    let app = makeApplication(
        router: buildRouter(session: session, options: options, metrics: metrics, logger: logger),
        webSocketRouter: buildWebSocketRouter(session: session, options: options), options: options, logger: logger)
    return BuiltService(services: [app, DownloadService(manager: manager)], manager: manager, session: session)
}

/// The HTTP server over the routers, as `options` asks (address, body limit), with its limits.
func makeApplication(
    router: Router<BasicWebSocketRequestContext>, webSocketRouter: Router<BasicWebSocketRequestContext>,
    options: ServerOptions, logger: Logger
) -> some ApplicationProtocol {
    Application(
        router: router,
        // A connection's first request head is due within `firstRequestDeadline` (10 s), then idle connections end
        // after 30 s (nothing read or written), a WebSocket when its pings go unanswered; at most `connectionLimit`
        // at once, below the descriptor limit with a reserve for the downloads' sockets and files, so a flood waits
        // in the backlog instead of taking the process to EMFILE. A WebSocket message is at most the body limit.
        server: .http1WebSocketUpgrade(
            webSocketRouter: webSocketRouter,
            configuration: .init(
                http1: .init(idleTimeout: .seconds(30)),
                ws: .init(maxFrameSize: options.maximumRequestSize, autoPing: .enabled(timePeriod: .seconds(30)))),
            firstRequestDeadline: options.firstRequestDeadline),
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
}

/// The HTTP routes: aria2's JSON-RPC at `/jsonrpc` (POST, and GET as aria2 takes it), the downloads as JSON at
/// `/api/downloads` (paged), `/healthz`, `/metrics` (Prometheus) and the page at `/`.
/// - Parameters:
///   - session: the aria2 methods.
///   - options: the secret (`/api/downloads` and `/metrics` then need `Authorization: Bearer SECRET`; the page reads
///     it from its address's fragment, `/#token=SECRET`, which browsers never send), the origin rules (on a loopback
///     bind only loopback names and `--host` may be named by a request's `Host`: DNS rebinding), the body limit.
///   - metrics: what `/metrics` renders.
///   - logger: one line per request (method, path without its query, status, milliseconds; never a secret).
/// - Returns: the router.
func buildRouter(
    session: Aria2Session, options: ServerOptions, metrics: ServerMetrics, logger: Logger
) -> Router<BasicWebSocketRequestContext> {
    let router = Router(context: BasicWebSocketRequestContext.self)
    router.add(middleware: RequestLogMiddleware(logger: logger))
    router.add(middleware: MetricsMiddleware())
    if options.allowsEveryOrigin {
        router.add(
            middleware: CORSMiddleware(
                allowOrigin: .all, allowHeaders: [.contentType, .authorization], allowMethods: [.get, .post]))
    }
    router.add(
        middleware: OriginGuard(
            allowedHosts: OriginGuard<BasicWebSocketRequestContext>.allowedHosts(boundTo: options.host),
            allowsEveryOrigin: options.allowsEveryOrigin))
    let manager = session.manager
    let secret = options.secret
    let limit = options.maximumRequestSize
    router.post("jsonrpc") { request, _ -> Response in
        // Refused before a byte of it is read when its length says so; a chunked body is cut at the limit.
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            return Response(status: .contentTooLarge, headers: [.connection: "close"])
        }
        let body = try await request.body.collect(upTo: limit)
        guard let reply = await session.reply(to: Data(body.readableBytesView)) else {
            return Response(status: .noContent)  // notifications only: nothing to answer
        }
        return json(reply.body, status: .init(code: reply.httpStatus))
    }
    router.get("jsonrpc") { request, _ -> Response in
        try await JSONRPCOverGET.respond(to: request, session: session, allowsEveryOrigin: options.allowsEveryOrigin)
    }
    router.get("api/downloads") { request, _ -> Response in
        guard bearerMatches(request, secret: secret) else { return unauthorized() }
        return try await DownloadsPage.response(for: request, manager: manager)
    }
    router.get("healthz") { _, _ -> Response in
        // Answers while the manager does: a manager stuck on its actor makes this time out, as a probe wants.
        let count = await manager.maximumActiveDownloads
        return json(Data(#"{"status":"ok","maxConcurrentDownloads":\#(count)}"#.utf8))
    }
    router.get("metrics") { request, _ -> Response in
        guard bearerMatches(request, secret: secret) else { return unauthorized() }
        let text = await metrics.render(manager: manager, session: session)
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }
    router.get("/") { _, _ -> Response in
        Response(
            status: .ok, headers: [.contentType: "text/html; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: StatusPage.html)))
    }
    return router
}

/// The WebSocket routes: aria2's JSON-RPC at `/jsonrpc`, answered on the socket, with aria2's notifications
/// (`aria2.onDownloadStart` …) pushed as downloads change. The host and origin guard applies to the upgrade.
func buildWebSocketRouter(session: Aria2Session, options: ServerOptions) -> Router<BasicWebSocketRequestContext> {
    let router = Router(context: BasicWebSocketRequestContext.self)
    router.add(
        middleware: OriginGuard(
            allowedHosts: OriginGuard<BasicWebSocketRequestContext>.allowedHosts(boundTo: options.host),
            allowsEveryOrigin: options.allowsEveryOrigin))
    let limit = options.maximumRequestSize
    router.ws("jsonrpc") { inbound, outbound, context in
        try await WebSocketRPC.serve(inbound: inbound, outbound: outbound, session: session, limit: limit)
    }
    return router
}

/// Whether `request` carries `Authorization: Bearer SECRET` (or no secret is set), compared in constant time.
func bearerMatches(_ request: Request, secret: String?) -> Bool {
    guard let secret else { return true }
    let given = request.headers[.authorization] ?? ""
    return given.hasPrefix("Bearer ") && Aria2Session.equalInConstantTime(String(given.dropFirst(7)), secret)
}

func unauthorized() -> Response {
    Response(status: .unauthorized, headers: [.wwwAuthenticate: "Bearer"])
}

func json(_ data: Data, status: HTTPResponse.Status = .ok) -> Response {
    Response(
        status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
}
