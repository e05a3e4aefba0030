import Downloader
import Foundation

extension Aria2Session {
    /// Runs an authorised method.
    func perform(_ method: String, _ params: Parameters) async throws(Aria2Error) -> JSONValue {
        switch method {
        case "aria2.addUri": return .string(try await addUri(params))
        case "aria2.remove", "aria2.forceRemove": return .string(try await remove(params.string(0, "gid")))
        case "aria2.pause", "aria2.forcePause": return .string(try await pause(params.string(0, "gid")))
        case "aria2.pauseAll", "aria2.forcePauseAll":
            for receipt in await manager.allReceipts where receipt.state == .queued || receipt.state == .downloading {
                await manager.suspend(receipt.url)
            }
            return "OK"
        case "aria2.unpause": return .string(try await unpause(params.string(0, "gid")))
        case "aria2.unpauseAll":
            for receipt in await manager.allReceipts where receipt.state == .suspended || receipt.state == .idle {
                await manager.resume(receipt.url)
            }
            return "OK"
        case "aria2.tellStatus":
            let gid = try params.string(0, "gid")
            let keys = try params.keys(1)
            if let receipt = try await find(gid) { return status(of: receipt, keys: keys) }
            guard let gone = removed.last(where: { $0.gid.hasPrefix(gid) }) else { throw .gidNotFound(gid) }
            return keys.map { keys in .object(gone.status.object?.filter { keys.contains($0.key) } ?? [:]) }
                ?? gone.status
        case "aria2.getUris":
            let receipt = try await found(params.string(0, "gid"))
            return [["uri": .string(receipt.url.absoluteString), "status": "used"]]
        case "aria2.getFiles":
            let receipt = try await found(params.string(0, "gid"))
            return status(of: receipt, keys: ["files"]).object?["files"] ?? []
        case "aria2.tellActive":
            let keys = try params.keys(0)
            return .array(await list { $0.state == .downloading }.map { status(of: $0, keys: keys) })
        case "aria2.tellWaiting":
            let waiting = await list { [.queued, .suspended, .idle].contains($0.state) }.map { status(of: $0) }
            return try Self.page(waiting, params)
        case "aria2.tellStopped":
            let stopped = await list { $0.state == .completed || $0.state == .failed }.map { status(of: $0) }
            return try Self.page(stopped + removed.map(\.status), params)
        case "aria2.getOption":
            let receipt = try await found(params.string(0, "gid"))
            let file = path(of: receipt)
            return [
                "dir": .string((file as NSString).deletingLastPathComponent),
                "out": .string((file as NSString).lastPathComponent),
            ]
        case "aria2.getGlobalOption":
            return [
                "dir": .string(directory.path),
                "max-concurrent-downloads": .string(String(await manager.maximumActiveDownloads)),
            ]
        case "aria2.changeGlobalOption": return try await changeGlobalOption(params.object(0, "options"))
        case "aria2.getGlobalStat": return await globalStat()
        case "aria2.removeDownloadResult":
            try await removeResult(params.string(0, "gid"))
            return "OK"
        case "aria2.purgeDownloadResult":
            for receipt in await manager.allReceipts where receipt.state == .completed || receipt.state == .failed {
                await manager.forget(receipt.url)
            }
            removed.removeAll()
            return "OK"
        case "aria2.getVersion":
            return ["version": .string(DownloadManager.version), "enabledFeatures": ["HTTPS", "Message Digest"]]
        case "aria2.getSessionInfo": return ["sessionId": .string(sessionID)]
        case "aria2.shutdown", "aria2.forceShutdown":
            requestShutdown()
            return "OK"
        case "aria2.saveSession": return "OK"  // every change is saved as it happens
        default: throw .methodNotFound(method)
        }
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

    func changeGlobalOption(_ options: [String: JSONValue]) async throws(Aria2Error) -> JSONValue {
        for (name, value) in options {
            switch name {
            case "max-concurrent-downloads":
                guard let limit = value.integer, limit >= 1 else {
                    throw .invalidParams("max-concurrent-downloads must be a positive integer")
                }
                await manager.setMaximumActiveDownloads(limit)
            default:
                throw .refused("option \(name) is not supported by downloader-server")
            }
        }
        return "OK"
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
