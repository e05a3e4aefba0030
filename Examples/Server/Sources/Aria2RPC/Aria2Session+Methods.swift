import Downloader
import Foundation

/// One of aria2's methods: its name, whether it needs the secret, and what it does to a session.
struct Aria2Method: Sendable {
    let name: String
    /// `false` for the two that aria2 answers without the token (`system.listMethods`, `system.listNotifications`)
    /// and for `system.multicall`, whose calls each carry their own.
    let needsToken: Bool
    let run: @Sendable (isolated Aria2Session, Parameters) async throws(Aria2Error) -> JSONValue

    init(
        _ name: String, needsToken: Bool = true,
        _ run: @escaping @Sendable (isolated Aria2Session, Parameters) async throws(Aria2Error) -> JSONValue
    ) {
        self.name = name
        self.needsToken = needsToken
        self.run = run
    }
}

extension Aria2Session {
    /// Every method this session answers, in `system.listMethods`' order: the one place a method is named.
    static let table: [Aria2Method] = [
        Aria2Method("aria2.addUri") { session, params throws(Aria2Error) in .string(try await session.addUri(params)) },
        Aria2Method("aria2.remove") { session, params throws(Aria2Error) in
            .string(try await session.remove(params.string(0, "gid")))
        },
        Aria2Method("aria2.forceRemove") { session, params throws(Aria2Error) in
            .string(try await session.remove(params.string(0, "gid")))
        },
        Aria2Method("aria2.pause") { session, params throws(Aria2Error) in
            .string(try await session.pause(params.string(0, "gid")))
        },
        Aria2Method("aria2.pauseAll") { session, _ throws(Aria2Error) in await session.pauseAll() },
        Aria2Method("aria2.forcePause") { session, params throws(Aria2Error) in
            .string(try await session.pause(params.string(0, "gid")))
        },
        Aria2Method("aria2.forcePauseAll") { session, _ throws(Aria2Error) in await session.pauseAll() },
        Aria2Method("aria2.unpause") { session, params throws(Aria2Error) in
            .string(try await session.unpause(params.string(0, "gid")))
        },
        Aria2Method("aria2.unpauseAll") { session, _ throws(Aria2Error) in await session.unpauseAll() },
        Aria2Method("aria2.tellStatus") { session, params throws(Aria2Error) in try await session.tellStatus(params) },
        Aria2Method("aria2.getUris") { session, params throws(Aria2Error) in
            let receipt = try await session.found(params.string(0, "gid"))
            return [["uri": .string(receipt.url.absoluteString), "status": "used"]]
        },
        Aria2Method("aria2.getFiles") { session, params throws(Aria2Error) in
            let receipt = try await session.found(params.string(0, "gid"))
            return session.status(of: receipt, keys: ["files"]).object?["files"] ?? []
        },
        Aria2Method("aria2.getServers") { session, params throws(Aria2Error) in
            let gid = try params.string(0, "gid")
            let receipt = try await session.found(gid)
            // As aria2c: only an active download has servers; the one URL it is fetched from.
            guard receipt.state == .downloading else { throw .refused("No active download for GID#\(gid)") }
            let uri = JSONValue.string(receipt.url.absoluteString)
            let speed = JSONValue.string(String(Int(receipt.bytesPerSecond ?? 0)))
            return [["index": "1", "servers": [["uri": uri, "currentUri": uri, "downloadSpeed": speed]]]]
        },
        Aria2Method("aria2.tellActive") { session, params throws(Aria2Error) in
            let keys = try params.keys(0)
            return .array(await session.list { $0.state == .downloading }.map { session.status(of: $0, keys: keys) })
        },
        Aria2Method("aria2.tellWaiting") { session, params throws(Aria2Error) in
            let waiting = await session.list { [.queued, .suspended, .idle].contains($0.state) }
            return try Aria2Session.page(waiting.map { session.status(of: $0) }, params)
        },
        Aria2Method("aria2.tellStopped") { session, params throws(Aria2Error) in
            let stopped = await session.list { $0.state == .completed || $0.state == .failed }
            return try Aria2Session.page(stopped.map { session.status(of: $0) } + session.removed.map(\.status), params)
        },
        Aria2Method("aria2.getOption") { session, params throws(Aria2Error) in
            .object(try await session.options(of: session.found(params.string(0, "gid"))))
        },
        Aria2Method("aria2.changeOption") { session, params throws(Aria2Error) in
            try await session.changeOption(params.string(0, "gid"), params.object(1, "options"))
        },
        Aria2Method("aria2.getGlobalOption") { session, _ throws(Aria2Error) in .object(await session.globalOptions())
        },
        Aria2Method("aria2.changeGlobalOption") { session, params throws(Aria2Error) in
            try await session.changeGlobalOption(params.object(0, "options"))
        },
        Aria2Method("aria2.getGlobalStat") { session, _ throws(Aria2Error) in await session.globalStat() },
        Aria2Method("aria2.purgeDownloadResult") { session, _ throws(Aria2Error) in
            await session.purgeDownloadResults()
            return "OK"
        },
        Aria2Method("aria2.removeDownloadResult") { session, params throws(Aria2Error) in
            try await session.removeResult(params.string(0, "gid"))
            return "OK"
        },
        Aria2Method("aria2.getVersion") { _, _ throws(Aria2Error) in
            ["version": .string(DownloadManager.version), "enabledFeatures": ["HTTPS", "Message Digest"]]
        },
        Aria2Method("aria2.getSessionInfo") { session, _ throws(Aria2Error) in ["sessionId": .string(session.sessionID)]
        },
        Aria2Method("aria2.shutdown") { session, _ throws(Aria2Error) in
            session.requestShutdown()
            return "OK"
        },
        Aria2Method("aria2.forceShutdown") { session, _ throws(Aria2Error) in
            session.requestShutdown()
            return "OK"
        },
        Aria2Method("aria2.saveSession") { _, _ throws(Aria2Error) in "OK" },  // every change is saved as it happens
        Aria2Method("system.multicall", needsToken: false) { session, params throws(Aria2Error) in
            await session.multicall(params.values)
        },
        Aria2Method("system.listMethods", needsToken: false) { _, _ throws(Aria2Error) in
            .array(Aria2Session.table.map { .string($0.name) })
        },
        Aria2Method("system.listNotifications", needsToken: false) { _, _ throws(Aria2Error) in
            .array(Aria2Session.notifications.map(JSONValue.string))
        },
    ]

    /// `table` by name.
    static let methodsByName = Dictionary(uniqueKeysWithValues: table.map { ($0.name, $0) })

    /// The methods this session answers, as `system.listMethods` lists them.
    public static var methods: [String] { table.map(\.name) }

    func pauseAll() async -> JSONValue {
        for receipt in await manager.allReceipts where receipt.state == .queued || receipt.state == .downloading {
            await manager.suspend(receipt.url)
        }
        return "OK"
    }

    func unpauseAll() async -> JSONValue {
        for receipt in await manager.allReceipts where receipt.state == .suspended || receipt.state == .idle {
            await manager.resume(receipt.url)
        }
        return "OK"
    }

    func tellStatus(_ params: Parameters) async throws(Aria2Error) -> JSONValue {
        let gid = try params.string(0, "gid")
        let keys = try params.keys(1)
        if let receipt = try await find(gid) { return status(of: receipt, keys: keys) }
        guard let gone = removed.last(where: { $0.gid.hasPrefix(gid) }) else { throw .gidNotFound(gid) }
        return keys.map { keys in .object(gone.status.object?.filter { keys.contains($0.key) } ?? [:]) }
            ?? gone.status
    }

    func purgeDownloadResults() async {
        for receipt in await manager.allReceipts where receipt.state == .completed || receipt.state == .failed {
            await manager.forget(receipt.url)
            urls[Self.gid(of: receipt)] = nil
        }
        removed.removeAll()
    }

    /// The downloads that match, in the order they were first added.
    func list(_ matches: (DownloadReceipt) -> Bool) async -> [DownloadReceipt] {
        let all = await manager.allReceipts
        listings += 1
        for receipt in all { urls[Self.gid(of: receipt)] = receipt.url }
        return all.filter(matches)
    }

    /// `offset`, `num` and `keys` of `aria2.tellWaiting` and `aria2.tellStopped`: a negative offset counts from the
    /// end and lists backwards.
    static func page(_ all: [JSONValue], _ params: Parameters) throws(Aria2Error) -> JSONValue {
        let offset = try params.integer(0, "offset")
        let count = try params.integer(1, "num")
        guard count >= 0 else { throw .invalidParams("num must not be negative") }
        let keys = try params.keys(2)
        let picked: ArraySlice<JSONValue>
        if offset >= 0 {
            picked = all.dropFirst(offset).prefix(count)
        } else {
            let start = all.count + offset  // -1: the last one
            picked = start < 0 ? [] : ArraySlice(all[...start].reversed().prefix(count))
        }
        return .array(
            picked.map { status in
                guard let keys else { return status }
                return .object(status.object?.filter { keys.contains($0.key) } ?? [:])
            })
    }

    /// The download of a GID or of a unique prefix of one; `nil` when there is none.
    func find(_ gid: String) async throws(Aria2Error) -> DownloadReceipt? {
        guard !gid.isEmpty, gid.count <= 16, gid.allSatisfy(\.isHexDigit) else {
            throw .refused("Bad GID \(gid)")
        }
        let key = gid.lowercased()
        if !indexed && (key.count < 16 || urls[key] == nil) {
            _ = await list { _ in false }  // learn every download's GID, once
            indexed = true
        }
        let match: (gid: String, url: URL)
        if key.count == 16 {
            guard let url = urls[key] else { return nil }
            match = (key, url)
        } else {
            // A prefix (people type a few digits): a scan, as aria2 does.
            let matches = urls.filter { $0.key.hasPrefix(key) }
            guard matches.count == 1, let only = matches.first else {
                if matches.count > 1 { throw .refused("GID \(gid) is not unique") }
                return nil
            }
            match = (only.key, only.value)
        }
        guard let receipt = await manager.receipt(for: match.url) else {
            urls[match.gid] = nil
            return nil
        }
        return receipt
    }

    /// The download of a GID, or `GID … is not found`.
    func found(_ gid: String) async throws(Aria2Error) -> DownloadReceipt {
        guard let receipt = try await find(gid) else { throw .gidNotFound(gid) }
        return receipt
    }

    func pause(_ gid: String) async throws(Aria2Error) -> String {
        try await control(gid, in: [.queued, .downloading], "paused") { await $0.suspend($1) }
    }

    func unpause(_ gid: String) async throws(Aria2Error) -> String {
        try await control(gid, in: [.suspended, .idle], "unpaused") { await $0.resume($1) }
    }

    /// Pauses or continues a download that is in one of `states` (aria2 refuses the others).
    /// - Returns: its GID.
    private func control(
        _ gid: String, in states: Set<DownloadState>, _ verb: String,
        _ act: (DownloadManager, URL) async -> Void
    ) async throws(Aria2Error) -> String {
        let receipt = try await found(gid)
        guard states.contains(receipt.state) else { throw .refused("GID#\(gid) cannot be \(verb) now") }
        await act(manager, receipt.url)
        return Self.gid(of: receipt)
    }

    /// Stops and deletes a download that has not completed (its partial file goes); a completed or failed one is a
    /// result (`aria2.removeDownloadResult`), as in aria2.
    func remove(_ gid: String) async throws(Aria2Error) -> String {
        let receipt = try await found(gid)
        guard receipt.state != .completed && receipt.state != .failed else {
            throw .refused("Active Download not found for GID#\(gid)")
        }
        var last = status(of: receipt)
        if case .object(var fields) = last {
            fields["status"] = "removed"
            fields["downloadSpeed"] = "0"
            fields["connections"] = "0"
            fields["errorCode"] = "31"  // aria2: "aborted"
            last = .object(fields)
        }
        await manager.remove(receipt.url)
        let id = Self.gid(of: receipt)
        removed.removeAll { $0.gid == id }
        removed.append((id, last))
        urls[id] = nil
        return id
    }

    /// Forgets a completed or failed download (a completed file stays where it is) or a removed one.
    func removeResult(_ gid: String) async throws(Aria2Error) {
        if let receipt = try await find(gid), receipt.state == .completed || receipt.state == .failed {
            await manager.forget(receipt.url)
            urls[Self.gid(of: receipt)] = nil
        } else if let index = removed.lastIndex(where: { $0.gid.hasPrefix(gid) }) {
            removed.remove(at: index)
        } else {
            throw .refused("Could not remove download result of GID#\(gid)")
        }
    }

    /// The options of a download that this service honours, as aria2 names them (values are strings).
    func options(of receipt: DownloadReceipt) -> [String: JSONValue] {
        let file = path(of: receipt)
        var options: [String: JSONValue] = [
            "dir": .string((file as NSString).deletingLastPathComponent),
            "out": .string((file as NSString).lastPathComponent),
        ]
        if let checksum = receipt.expectedChecksum { options["checksum"] = .string(checksum.description) }
        return options
    }

    /// `aria2.changeOption`: a download's options cannot change once it is added (its file and checksum are its
    /// identity here); an option given its current value is accepted, any other refused by name.
    func changeOption(_ gid: String, _ changes: [String: JSONValue]) async throws(Aria2Error) -> JSONValue {
        let current = options(of: try await found(gid))
        for (name, value) in changes.sorted(by: { $0.key < $1.key }) where current[name] != value.optionText {
            throw .refused("option \(name) of a download cannot be changed by downloader-server")
        }
        return "OK"
    }

    /// The global options this service honours, as aria2 names them.
    func globalOptions() async -> [String: JSONValue] {
        var options = fixedGlobalOptions.mapValues(JSONValue.string)
        options["dir"] = .string(directory.path)
        options["max-concurrent-downloads"] = .string(String(await manager.maximumActiveDownloads))
        options["max-overall-download-limit"] = .string(String(await manager.maximumBytesPerSecond ?? 0))
        return options
    }

    /// `aria2.changeGlobalOption`: `max-concurrent-downloads` and `max-overall-download-limit` (bytes per second,
    /// `K`/`M` suffixes as aria2 takes them, `0` for none) change; an option given its current value is accepted
    /// (clients send the whole set back); any other is refused by name, before any change is made.
    func changeGlobalOption(_ options: [String: JSONValue]) async throws(Aria2Error) -> JSONValue {
        let current = await globalOptions()
        var limit: Int?
        var bandwidth: Int??
        for (name, value) in options.sorted(by: { $0.key < $1.key }) {
            switch name {
            case "max-concurrent-downloads":
                guard let count = value.integer, count >= 1 else {
                    throw .invalidParams("max-concurrent-downloads must be a positive integer")
                }
                limit = count
            case "max-overall-download-limit":
                guard let bytes = Self.byteCount(value.optionText?.string) else {
                    throw .refused("max-overall-download-limit must be bytes per second (0, 500K, 2M)")
                }
                bandwidth = .some(bytes > 0 ? bytes : nil)
            default:
                guard current[name] == value.optionText else {
                    throw .refused("option \(name) is not supported by downloader-server")
                }
            }
        }
        if let limit { await manager.setMaximumActiveDownloads(limit) }
        if let bandwidth { await manager.setMaximumBytesPerSecond(bandwidth) }
        return "OK"
    }

    /// A size as aria2 reads one: digits, optionally followed by `K` (1024) or `M` (1024²), either case.
    /// - Returns: the bytes, or `nil` when it is not such a size.
    static func byteCount(_ text: String?) -> Int? {
        guard var digits = text?.trimmingCharacters(in: .whitespaces), !digits.isEmpty else { return nil }
        var unit = 1
        switch digits.last {
        case "K", "k": unit = 1 << 10
        case "M", "m": unit = 1 << 20
        default: break
        }
        if unit > 1 { digits.removeLast() }
        guard !digits.isEmpty, digits.allSatisfy({ ("0"..."9").contains($0) }), let value = Int(digits),
            value <= Int.max / unit
        else { return nil }
        return value * unit
    }

    func globalStat() async -> JSONValue {
        let all = await list { _ in true }
        let speed = all.reduce(0.0) { $0 + ($1.bytesPerSecond ?? 0) }
        let stopped = all.filter { $0.state == .completed || $0.state == .failed }.count + removed.count
        return [
            "downloadSpeed": .string(String(Int(speed))),
            "uploadSpeed": "0",
            "numActive": .string(String(all.filter { $0.state == .downloading }.count)),
            "numWaiting": .string(String(all.filter { [.queued, .suspended, .idle].contains($0.state) }.count)),
            "numStopped": .string(String(stopped)),
            "numStoppedTotal": .string(String(stopped)),
        ]
    }
}
