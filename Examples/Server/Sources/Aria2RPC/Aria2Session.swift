import Downloader
import Foundation

/// aria2's JSON-RPC methods over a `DownloadManager`: what `aria2.addUri`, `aria2.tellStatus` and the others do to
/// the manager, and the answers in aria2's shapes (field names, numbers as strings, 16-hex-digit GIDs).
///
/// A download's GID is the first 16 hex digits of its `DownloadReceipt.identifier`, so it is the same after a
/// restart and for the same URL added twice (the manager joins a second request for a URL to the first: aria2 would
/// make a second download). Downloads `aria2.remove` removed are remembered as `removed` until
/// `aria2.removeDownloadResult` or `aria2.purgeDownloadResult`, as aria2 does, in memory only.
public actor Aria2Session {
    /// The manager the methods drive.
    public let manager: DownloadManager
    /// Where files land (the manager's completed area): `dir` in answers, and the folder `dir` options stay below.
    public let directory: URL
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
    /// A number for `aria2.getSessionInfo`, new in each process.
    let sessionID = (0..<20).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()

    /// Makes a session.
    /// - Parameters:
    ///   - manager: the manager to drive.
    ///   - directory: the manager's completed area.
    ///   - secret: the `--rpc-secret`: every method but `system.listMethods` and `system.listNotifications` then
    ///     needs `token:SECRET` as its first parameter.
    ///   - requestShutdown: what `aria2.shutdown` and `aria2.forceShutdown` call (a graceful stop of the service).
    public init(
        manager: DownloadManager, directory: URL, secret: String?, requestShutdown: @escaping @Sendable () -> Void
    ) {
        self.manager = manager
        self.directory = directory.standardizedFileURL
        self.secret = secret.flatMap { $0.isEmpty ? nil : $0 }
        self.requestShutdown = requestShutdown
    }

    /// The GID of a URL.
    public static func gid(of receipt: DownloadReceipt) -> String { String(receipt.identifier.prefix(16)) }

    /// The methods this session answers, as `system.listMethods` lists them.
    public static let methods = [
        "aria2.addUri", "aria2.remove", "aria2.forceRemove", "aria2.pause", "aria2.pauseAll", "aria2.forcePause",
        "aria2.forcePauseAll", "aria2.unpause", "aria2.unpauseAll", "aria2.tellStatus", "aria2.getUris",
        "aria2.getFiles", "aria2.tellActive", "aria2.tellWaiting", "aria2.tellStopped", "aria2.getOption",
        "aria2.getGlobalOption", "aria2.changeGlobalOption", "aria2.getGlobalStat", "aria2.purgeDownloadResult",
        "aria2.removeDownloadResult", "aria2.getVersion", "aria2.getSessionInfo", "aria2.shutdown",
        "aria2.forceShutdown", "aria2.saveSession", "system.multicall", "system.listMethods",
        "system.listNotifications",
    ]

    /// The notifications `system.listNotifications` lists: none. aria2 sends them over WebSocket, which this
    /// service does not offer; clients poll `aria2.tellActive` and `aria2.tellStatus` (as they do over HTTP).
    public static let notifications: [String] = []

    /// Calls one method.
    /// - Parameters:
    ///   - method: its name, e.g. `aria2.addUri`.
    ///   - params: its parameters, the secret token first when the session has one.
    /// - Returns: its result.
    /// - Throws: `Aria2Error` for an unknown method, a wrong token, bad parameters or a refusal.
    public func call(_ method: String, _ params: [JSONValue]) async throws(Aria2Error) -> JSONValue {
        switch method {
        case "system.listMethods": return .array(Self.methods.map(JSONValue.string))
        case "system.listNotifications": return .array(Self.notifications.map(JSONValue.string))
        case "system.multicall": return await multicall(params)
        default: break
        }
        guard Self.methods.contains(method) else { throw .methodNotFound(method) }
        let params = try authorized(params)
        return try await perform(method, Parameters(params))
    }

    /// The parameters without the token, after checking it.
    func authorized(_ params: [JSONValue]) throws(Aria2Error) -> [JSONValue] {
        var params = params
        let token: String?
        if let first = params.first?.string, first.hasPrefix("token:") {
            token = String(first.dropFirst("token:".count))
            params.removeFirst()
        } else {
            token = nil
        }
        if let secret, !Self.equalInConstantTime(token ?? "", secret) { throw .unauthorized }
        return params
    }

    /// Compares two secrets without stopping at the first difference.
    static func equalInConstantTime(_ a: String, _ b: String) -> Bool {
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
