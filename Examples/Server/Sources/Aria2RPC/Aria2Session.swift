import Downloader
import Foundation
import Logging

/// aria2's JSON-RPC methods over a `DownloadManager`: what `aria2.addUri`, `aria2.tellStatus` and the others do to
/// the manager, and the answers in aria2's shapes (field names, numbers as strings, 16-hex-digit GIDs).
///
/// A download's GID is the first 16 hex digits of its `DownloadReceipt.identifier`, so it is the same after a
/// restart and for the same URL added twice (the manager joins a second request for a URL to the first: aria2 would
/// make a second download). Downloads `aria2.remove` removed are remembered as `removed` until
/// `aria2.removeDownloadResult` or `aria2.purgeDownloadResult`, as aria2 does, in memory only.
public actor Aria2Session {
    /// The manager the methods drive.
    public nonisolated let manager: DownloadManager
    /// Where files land (the manager's completed area): `dir` in answers, and the folder `dir` options stay below.
    public nonisolated let directory: URL
    let secret: String?
    let requestShutdown: @Sendable () -> Void
    /// Downloads by GID: every download once `indexed` (the manager's are read at the first lookup that misses;
    /// then this session adds and removes its own), so a lookup is one dictionary access, not a scan.
    var urls: [String: URL] = [:]
    /// Whether `urls` holds every download the manager had when it was read.
    var indexed = false
    /// How many times every receipt was read from the manager (the tests count the scans).
    var listings = 0
    /// Most calls one batch or `system.multicall` may carry (a larger one is refused before any runs).
    public static let maximumCallsPerBatch = 10_000
    /// What `aria2.remove` removed, as its last status, in the order they were removed.
    var removed: [(gid: String, status: JSONValue)] = []
    /// The file a download added with `dir` or an `out` path is written to (`DownloadOptions.destination`).
    var destinations: [URL: URL] = [:]
    /// The global options `aria2.getGlobalOption` answers beside `dir` and `max-concurrent-downloads`: those of the
    /// command line this service honours (`rpc-listen-port`, `continue`, …), as aria2 names them.
    let fixedGlobalOptions: [String: String]
    /// Where refusals of the secret are logged.
    let logger: Logger
    /// How many calls came with a wrong token or none (`/metrics`).
    public private(set) var authenticationFailures = 0
    /// A number for `aria2.getSessionInfo`, new in each process.
    let sessionID = (0..<20).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()

    /// Makes a session.
    /// - Parameters:
    ///   - manager: the manager to drive.
    ///   - directory: the manager's completed area.
    ///   - secret: the `--rpc-secret`: every method but `system.listMethods` and `system.listNotifications` then
    ///     needs `token:SECRET` as its first parameter.
    ///   - requestShutdown: what `aria2.shutdown` and `aria2.forceShutdown` call (a graceful stop of the service).
    ///   - globalOptions: the command line's options as aria2 names them, for `aria2.getGlobalOption`.
    ///   - logger: where a wrong or missing token is logged (never the token).
    public init(
        manager: DownloadManager, directory: URL, secret: String?, globalOptions: [String: String] = [:],
        logger: Logger = Logger(label: "aria2-rpc"), requestShutdown: @escaping @Sendable () -> Void
    ) {
        self.fixedGlobalOptions = globalOptions
        self.logger = logger
        self.manager = manager
        self.directory = directory.standardizedFileURL
        self.secret = secret.flatMap { $0.isEmpty ? nil : $0 }
        self.requestShutdown = requestShutdown
    }

    /// The GID of a download.
    public static func gid(of receipt: DownloadReceipt) -> String { String(receipt.identifier.prefix(16)) }

    /// The GID of a download's URL (`DownloadReceipt.identifier` is the MD5 of the URL without credentials).
    public static func gid(of url: URL) -> String {
        String(Hashing.MD5.hash(data: Array(url.withoutCredentials.absoluteString.utf8)).description.prefix(16))
    }

    /// The notifications `system.listNotifications` lists, sent to WebSocket clients of `/jsonrpc` as aria2 does
    /// (`{"jsonrpc":"2.0","method":"aria2.onDownloadStart","params":[{"gid":"…"}]}`; see `notification(for:)`).
    public static let notifications = [
        "aria2.onDownloadStart", "aria2.onDownloadPause", "aria2.onDownloadStop", "aria2.onDownloadComplete",
        "aria2.onDownloadError",
    ]

    /// Calls one method.
    /// - Parameters:
    ///   - method: its name, e.g. `aria2.addUri`.
    ///   - params: its parameters, the secret token first when the session has one.
    /// - Returns: its result.
    /// - Throws: `Aria2Error` for an unknown method, a wrong token, bad parameters or a refusal.
    public func call(_ method: String, _ params: [JSONValue]) async throws(Aria2Error) -> JSONValue {
        guard let entry = Self.methodsByName[method] else { throw .methodNotFound(method) }
        let params = entry.needsToken ? try authorized(params, method: method) : params
        return try await entry.run(self, Parameters(params))
    }

    /// The parameters without the token, after checking it.
    func authorized(_ params: [JSONValue], method: String) throws(Aria2Error) -> [JSONValue] {
        var params = params
        let token: String?
        if let first = params.first?.string, first.hasPrefix("token:") {
            token = String(first.dropFirst("token:".count))
            params.removeFirst()
        } else {
            token = nil
        }
        if let secret, !Self.equalInConstantTime(token ?? "", secret) {
            authenticationFailures += 1
            // Never the token given: a typo of the secret is most of it.
            logger.warning(
                "authentication failed",
                metadata: ["method": "\(method)", "token": "\(token == nil ? "none" : "wrong")"])
            throw .unauthorized
        }
        return params
    }

    /// Compares two secrets without stopping at the first difference.
    public static func equalInConstantTime(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        var difference = UInt8(x.count == y.count ? 0 : 1)
        for index in 0..<max(x.count, y.count) {
            difference |= (index < x.count ? x[index] : 0) ^ (index < y.count ? y[index] : 0)
        }
        return difference == 0
    }

    /// `system.multicall`: each call's result in a one-element array, or its error as a struct.
    func multicall(_ params: [JSONValue]) async -> JSONValue {
        guard params.count == 1, let calls = params[0].array else {
            return Self.fault(.invalidParams("system.multicall takes one array of {methodName, params} structs"))
        }
        guard calls.count <= Self.maximumCallsPerBatch else {
            return Self.fault(.invalidParams("system.multicall takes at most \(Self.maximumCallsPerBatch) calls"))
        }
        var results: [JSONValue] = []
        for call in calls {
            guard let name = call.object?["methodName"]?.string else {
                results.append(Self.fault(.invalidParams("a call without methodName")))
                continue
            }
            guard name != "system.multicall" else {
                results.append(Self.fault(.refused("system.multicall cannot be nested")))
                continue
            }
            let inner = call.object?["params"]?.array ?? []
            do {
                results.append([try await self.call(name, inner)])
            } catch {
                results.append(Self.fault(error))
            }
        }
        return .array(results)
    }

    static func fault(_ error: Aria2Error) -> JSONValue {
        ["code": .int(error.code), "message": .string(error.message)]
    }
}
