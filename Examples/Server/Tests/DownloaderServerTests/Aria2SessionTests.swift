import Downloader
import Foundation
import Testing

@testable import Aria2RPC

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// aria2's JSON-RPC shapes without HTTP: the envelope, the secret, errors for what is wrong, and the answers' field
/// names and string-typed numbers. Downloads point at a closed loopback port: nothing leaves the machine.
@Suite("Aria2Session")
final class Aria2SessionTests {
    let fixture: Fixture
    let directory: URL
    let manager: DownloadManager
    let session: Aria2Session

    init() async throws {
        let fixture = try await Fixture(name: "aria2-tests", secret: "s3cret")
        (self.fixture, directory, manager, session) = (fixture, fixture.directory, fixture.manager, fixture.session)
    }

    deinit {
        fixture.remove()
    }

    /// Sends one JSON-RPC body and decodes the answer.
    func send(_ json: String) async throws -> JSONValue {
        let answer = try #require(await session.respond(to: Data(json.utf8)))
        return try JSONDecoder().decode(JSONValue.self, from: answer)
    }

    func call(_ method: String, _ params: String = "") async throws -> JSONValue {
        let separator = params.isEmpty ? "" : ","
        return try await send(
            #"{"jsonrpc":"2.0","id":"t","method":"\#(method)","params":["token:s3cret"\#(separator)\#(params)]}"#)
    }

    func errorCode(_ answer: JSONValue) -> Int? { answer.object?["error"]?.object?["code"]?.integer }

    @Test("The secret is required for every method but the two lists; a wrong one is 'Unauthorized'")
    func secret() async throws {
        let listed = try await send(#"{"jsonrpc":"2.0","id":1,"method":"system.listMethods"}"#)
        #expect(listed.object?["result"]?.array?.contains("aria2.addUri") == true)
        let wrong = try await send(#"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":["token:nope"]}"#)
        #expect(errorCode(wrong) == 1 && wrong.object?["error"]?.object?["message"] == "Unauthorized")
        let none = try await send(#"{"jsonrpc":"2.0","id":1,"method":"aria2.getGlobalStat"}"#)
        #expect(errorCode(none) == 1)
        let version = try await call("aria2.getVersion")
        #expect(version.object?["result"]?.object?["version"]?.string == DownloadManager.version)
    }

    @Test("Malformed bodies, unknown methods and bad parameters get JSON-RPC errors, never a crash")
    func errors() async throws {
        #expect(errorCode(try await send("{nope")) == -32700)
        #expect(errorCode(try await send("[]")) == -32600)
        #expect(errorCode(try await send(#"{"jsonrpc":"2.0","id":1}"#)) == -32600)
        #expect(errorCode(try await call("aria2.fly")) == -32601)
        #expect(errorCode(try await call("aria2.addUri", #""http://x/""#)) == -32602)
        #expect(errorCode(try await call("aria2.addUri", #"["ftp://x/f"]"#)) == 1)
        #expect(errorCode(try await call("aria2.addUri", #"["http://127.0.0.1:1/f"], {"bogus":"1"}"#)) == 1)
        #expect(errorCode(try await call("aria2.addUri", #"["http://127.0.0.1:1/f"], {"dir":"/etc"}"#)) == 1)
        #expect(errorCode(try await call("aria2.addUri", #"["http://127.0.0.1:1/f"], {"dir":"../x"}"#)) == 1)
        #expect(errorCode(try await call("aria2.addUri", #"["http://127.0.0.1:1/f"], {"dir":".downloader"}"#)) == 1)
        #expect(errorCode(try await call("aria2.addUri", #"["http://127.0.0.1:1/f"], {"out":"a/.b"}"#)) == 1)
        #expect(
            errorCode(try await call("aria2.addUri", #"["http://127.0.0.1:1/f"], {"header":"X: a\r\nY: b"}"#))
                == -32602)
        #expect(errorCode(try await call("aria2.addUri", #"["http://127.0.0.1:1/f"], {"checksum":"md5"}"#)) == -32602)
        #expect(errorCode(try await call("aria2.tellStatus", #""0123456789abcdef""#)) == 1)
        #expect(errorCode(try await call("aria2.tellStatus", #""not hex!""#)) == 1)
        #expect(errorCode(try await call("aria2.tellWaiting", #""a", 1"#)) == -32602)
        #expect(errorCode(try await call("aria2.changeGlobalOption", #"{"max-concurrent-downloads":"0"}"#)) == -32602)
        // A notification (no id) gets no answer; a batch answers each request with an id.
        #expect(await session.respond(to: Data(#"{"jsonrpc":"2.0","method":"aria2.getVersion"}"#.utf8)) == nil)
        let batch = try await send(
            #"[{"jsonrpc":"2.0","id":1,"method":"system.listNotifications"},{"jsonrpc":"2.0","id":2,"method":"x.y"}]"#)
        #expect(batch.array?.count == 2 && errorCode(batch.array![1]) == -32601)
    }

    @Test("addUri gives a 16-hex-digit GID; tellStatus speaks aria2's names with numbers as strings")
    func addAndTell() async throws {
        let added = try await call("aria2.addUri", #"["http://127.0.0.1:1/file.bin"], {"out":"named.bin"}"#)
        let gid = try #require(added.object?["result"]?.string)
        #expect(gid.count == 16 && gid.allSatisfy(\.isHexDigit))
        // The same URL again joins the same download (one download per URL).
        let again = try await call("aria2.addUri", #"["http://127.0.0.1:1/file.bin"]"#)
        #expect(again.object?["result"]?.string == gid)

        let status = try #require(try await call("aria2.tellStatus", #""\#(gid)""#).object?["result"]?.object)
        #expect(status["gid"]?.string == gid)
        #expect(["active", "waiting", "error"].contains(status["status"]?.string ?? ""))
        for key in ["totalLength", "completedLength", "downloadSpeed", "uploadLength", "connections"] {
            #expect(status[key]?.string.flatMap { Int($0) } != nil, "\(key) is a string of digits")
        }
        let file = try #require(status["files"]?.array?.first?.object)
        #expect(file["index"] == "1" && file["uris"]?.array?.first?.object?["uri"] == "http://127.0.0.1:1/file.bin")
        let some = try await call("aria2.tellStatus", #""\#(gid.prefix(6))", ["gid", "status"]"#)
        #expect(some.object?["result"]?.object?.keys.sorted() == ["gid", "status"], "a unique prefix, only the keys")

        // It fails (nothing listens on port 1): a stopped download with aria2's error fields.
        let deadline = ContinuousClock.now + .seconds(30)
        var stopped: [JSONValue] = []
        while stopped.isEmpty, ContinuousClock.now < deadline {
            stopped = try await call("aria2.tellStopped", "0, 10").object?["result"]?.array ?? []
            if stopped.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
        }
        let failed = try #require(stopped.first?.object)
        #expect(failed["status"] == "error" && failed["errorCode"]?.string != nil && failed["errorMessage"] != nil)
        #expect(errorCode(try await call("aria2.remove", #""\#(gid)""#)) == 1, "a stopped download is a result")
        #expect(try await call("aria2.removeDownloadResult", #""\#(gid)""#).object?["result"] == "OK")
        #expect(errorCode(try await call("aria2.tellStatus", #""\#(gid)""#)) == 1)
    }

    @Test("connections is the download's requests in flight, as the library counts them; 0 unless active (issue #50)")
    func connectionsCounted() async {
        var receipt = DownloadReceipt(
            url: URL(string: "http://127.0.0.1:1/f")!, filename: "f", fileURL: directory.appendingPathComponent("f"),
            state: .downloading)
        receipt.activeConnections = 4
        #expect(await session.status(of: receipt, keys: ["connections"]).object?["connections"] == "4")
        receipt.state = .suspended
        #expect(await session.status(of: receipt, keys: ["connections"]).object?["connections"] == "0")
    }

    @Test("pause, unpause, remove, getGlobalStat, changeGlobalOption and multicall")
    func control() async throws {
        let gid = try #require(
            try await call("aria2.addUri", #"["http://127.0.0.1:1/p"], {"pause":"true"}"#).object?["result"]?.string)
        let waiting = try await call("aria2.tellWaiting", #"0, 5, ["gid", "status"]"#)
        #expect(waiting.object?["result"] == [["gid": .string(gid), "status": "paused"]])
        #expect(errorCode(try await call("aria2.pause", #""\#(gid)""#)) == 1, "already paused")
        let stat = try #require(try await call("aria2.getGlobalStat").object?["result"]?.object)
        #expect(stat["numWaiting"] == "1" && stat["numActive"] == "0")
        #expect(
            try await call("aria2.changeGlobalOption", #"{"max-concurrent-downloads":"2"}"#).object?["result"] == "OK")
        #expect(await manager.maximumActiveDownloads == 2)

        let removed = try await call("aria2.remove", #""\#(gid)""#)
        #expect(removed.object?["result"]?.string == gid)
        let gone = try await call("aria2.tellStatus", #""\#(gid)", ["status"]"#)
        #expect(gone.object?["result"] == ["status": "removed"])

        let multicall = try await send(
            #"""
            {"jsonrpc":"2.0","id":"m","method":"system.multicall","params":[[
              {"methodName":"aria2.getVersion","params":["token:s3cret"]},
              {"methodName":"aria2.getVersion","params":["token:wrong"]},
              {"methodName":"aria2.purgeDownloadResult","params":["token:s3cret"]}]]}
            """#)
        let results = try #require(multicall.object?["result"]?.array)
        #expect(results.count == 3)
        #expect(results[0].array?.first?.object?["version"] != nil)
        #expect(results[1].object?["code"] == .int(1))
        #expect(results[2] == ["OK"])
        #expect(errorCode(try await call("aria2.tellStatus", #""\#(gid)""#)) == 1, "purged")
    }

    @Test("Unknown GIDs are looked up, not scanned: a batch of 2,000 reads the manager's list once (issue #50)")
    func lookups() async throws {
        for index in 0..<200 {
            _ = try await call("aria2.addUri", #"["http://127.0.0.1:1/l\#(index)"], {"pause":"true"}"#)
        }
        let batch = (0..<2000).map { index in
            #"{"jsonrpc":"2.0","id":\#(index),"method":"aria2.tellStatus","params":["token:s3cret","\#(String(format: "%016x", index))"]}"#
        }
        let answers = try #require(try await send("[" + batch.joined(separator: ",") + "]").array)
        #expect(answers.count == 2000 && answers.allSatisfy { errorCode($0) == 1 })
        #expect(await session.listings <= 1, "each unknown GID listed every download")
        let tooMany =
            "["
            + Array(repeating: #"{"jsonrpc":"2.0","id":1,"method":"system.listMethods"}"#, count: 10_001)
            .joined(separator: ",") + "]"
        #expect(errorCode(try await send(tooMany)) == -32600, "a batch over 10,000 calls is refused")
    }

    @Test("dir and out cannot leave the folder through a link in it (issue #50)")
    func links() async throws {
        let elsewhere = FileManager.default.temporaryDirectory.appendingPathComponent("elsewhere-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        try FileManager.default.createSymbolicLink(
            at: directory.appendingPathComponent("link"), withDestinationURL: elsewhere)
        try FileManager.default.createSymbolicLink(
            at: directory.appendingPathComponent("file.bin"),
            withDestinationURL: elsewhere.appendingPathComponent("file.bin"))
        for options in [
            #"{"dir":"link"}"#, #"{"out":"link/x.bin"}"#, #"{"dir":"link/deeper/still"}"#, #"{"out":"file.bin"}"#,
        ] {
            #expect(
                errorCode(try await call("aria2.addUri", #"["http://127.0.0.1:1/f"], \#(options)"#)) == 1, "\(options)")
        }
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("real"), withIntermediateDirectories: true)
        let inside = try await call("aria2.addUri", #"["http://127.0.0.1:1/g"], {"dir":"real"}"#)
        #expect(inside.object?["result"]?.string != nil, "a real folder inside is fine")
    }

    @Test(
        "A re-add with another out, dir or checksum than the download underway is refused; equal options join (issue #50)"
    )
    func conflictingReAdd() async throws {
        // A listener that never answers: the download stays running.
        let listener = tcpSocket()
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                try #require(bind(listener, $0, length) == 0 && listen(listener, 8) == 0)
                try #require(getsockname(listener, $0, &length) == 0)
            }
        }
        let url = "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))/held.bin"
        let checksum = "sha-256=" + String(repeating: "a", count: 64)
        let first = try await call("aria2.addUri", #"["\#(url)"], {"out":"one.bin","checksum":"\#(checksum)"}"#)
        let gid = try #require(first.object?["result"]?.string)
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline, await manager.receipt(for: URL(string: url)!)?.state != .downloading {
            try await Task.sleep(for: .milliseconds(20))
        }
        let otherChecksum = "sha-256=" + String(repeating: "b", count: 64)
        for options in [#"{"out":"two.bin"}"#, #"{"dir":"elsewhere"}"#, #"{"checksum":"\#(otherChecksum)"}"#] {
            let again = try await call("aria2.addUri", #"["\#(url)"], \#(options)"#)
            #expect(errorCode(again) == 1, "\(options): \(again)")
        }
        let same = try await call("aria2.addUri", #"["\#(url)"], {"out":"one.bin","checksum":"\#(checksum)"}"#)
        #expect(same.object?["result"]?.string == gid, "equal options join")
        let plain = try await call("aria2.addUri", #"["\#(url)"]"#)
        #expect(plain.object?["result"]?.string == gid, "no options join")
        _ = try await call("aria2.remove", #""\#(gid)""#)
    }

    @Test("addUri's pause and continue take a JSON boolean as aria2's clients send it, or its string (issue #50)")
    func pauseAsBoolean() async throws {
        // Before: only the string "true" paused; `"pause": true` was ignored and the download ran.
        for (index, value) in ["true", #""true""#].enumerated() {
            let url = "http://127.0.0.1:1/paused-\(index).bin"
            let added = try await call("aria2.addUri", #"["\#(url)"],{"pause":\#(value),"continue":true}"#)
            #expect(added.object?["result"]?.string != nil, "\(added)")
            let receipt = try #require(await manager.receipt(for: URL(string: url)!))
            #expect(receipt.state == .suspended, "pause \(value): \(receipt.state)")
        }
        let bad = try await call("aria2.addUri", #"["http://127.0.0.1:1/x.bin"],{"pause":"maybe"}"#)
        #expect(errorCode(bad) == -32602)
    }

    @Test("system.listMethods is the method table; every listed method answers (none is 'not found')")
    func methodTable() async throws {
        let listed = try await send(#"{"jsonrpc":"2.0","id":1,"method":"system.listMethods"}"#)
        let names = listed.object?["result"]?.array?.compactMap(\.string) ?? []
        #expect(names == Aria2Session.methods && names.count == Set(names).count)
        #expect(names.contains("aria2.changeOption") && names.contains("system.multicall"))
        for name in names where !["aria2.shutdown", "aria2.forceShutdown"].contains(name) {
            let answer = try await call(name)
            #expect(errorCode(answer) != -32601, "\(name): \(answer)")
        }
        let notifications = try await send(#"{"jsonrpc":"2.0","id":1,"method":"system.listNotifications"}"#)
        #expect(notifications.object?["result"]?.array?.contains("aria2.onDownloadComplete") == true)
    }

    @Test("Options: getOption and getGlobalOption say what is honoured; a change to anything else is refused by name")
    func options() async throws {
        let added = try await call("aria2.addUri", #"["http://127.0.0.1:1/opt.bin"],{"pause":"true","out":"o.bin"}"#)
        let gid = try #require(added.object?["result"]?.string)
        let options = try await call("aria2.getOption", #""\#(gid)""#)
        #expect(options.object?["result"]?.object?["out"]?.string == "o.bin", "\(options)")
        // The same value is accepted (clients send the set back), another refused with aria2's code 1.
        #expect(try await call("aria2.changeOption", #""\#(gid)",{"out":"o.bin"}"#).object?["result"] == "OK")
        #expect(errorCode(try await call("aria2.changeOption", #""\#(gid)",{"out":"other.bin"}"#)) == 1)
        let global = try await call("aria2.getGlobalOption")
        #expect(global.object?["result"]?.object?["max-concurrent-downloads"]?.string == "4", "\(global)")
        let changed = try await call(
            "aria2.changeGlobalOption", #"{"max-concurrent-downloads":2,"dir":"\#(directory.path)"}"#)
        #expect(changed.object?["result"] == "OK", "\(changed)")
        #expect(await manager.maximumActiveDownloads == 2)
        let refused = try await call("aria2.changeGlobalOption", #"{"max-concurrent-downloads":3,"split":"5"}"#)
        #expect(errorCode(refused) == 1, "\(refused)")
        #expect(await manager.maximumActiveDownloads == 2, "nothing changes when one option is refused")
        // The overall bandwidth limit, as aria2 takes it (issue #50: only max-concurrent-downloads changed before).
        #expect(global.object?["result"]?.object?["max-overall-download-limit"]?.string == "0")
        let limited = try await call("aria2.changeGlobalOption", #"{"max-overall-download-limit":"2M"}"#)
        #expect(limited.object?["result"] == "OK", "\(limited)")
        #expect(await manager.maximumBytesPerSecond == 2 << 20)
        let now = try await call("aria2.getGlobalOption")
        #expect(now.object?["result"]?.object?["max-overall-download-limit"]?.string == "2097152")
        #expect(errorCode(try await call("aria2.changeGlobalOption", #"{"max-overall-download-limit":"fast"}"#)) == 1)
        let lifted = try await call("aria2.changeGlobalOption", #"{"max-overall-download-limit":0}"#)
        #expect(lifted.object?["result"] == "OK")
        #expect(await manager.maximumBytesPerSecond == nil, "0 lifts it")
        #expect(Aria2Session.byteCount("500k") == 512_000 && Aria2Session.byteCount("12") == 12)
        #expect(Aria2Session.byteCount("") == nil && Aria2Session.byteCount("1G") == nil)
        #expect(Aria2Session.byteCount("M") == nil)
    }

    @Test("HTTP statuses as aria2c gives them: 400 for a refusal, 404 for an unknown method, 500 for the rest")
    func statuses() async throws {
        func status(_ json: String) async -> Int? { await session.reply(to: Data(json.utf8))?.httpStatus }
        #expect(await status(#"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":["token:s3cret"]}"#) == 200)
        #expect(
            await status(#"{"jsonrpc":"2.0","id":1,"method":"aria2.tellStatus","params":["token:s3cret","zz"]}"#) == 400
        )
        #expect(await status(#"{"jsonrpc":"2.0","id":1,"method":"aria2.nothing"}"#) == 404)
        #expect(
            await status(#"{"jsonrpc":"2.0","id":1,"method":"aria2.tellStatus","params":["token:s3cret",1]}"#) == 500)
        #expect(await status("{nope") == 500)
        #expect(await status(#"[{"jsonrpc":"2.0","id":1,"method":"aria2.nothing"}]"#) == 200, "a batch is 200")
    }

    @Test("A GET's query is the request aria2 reads: method, id as a string, params in base64; or a whole batch")
    func getQuery() throws {
        let params = Data(#"["token:s3cret"]"#.utf8).base64EncodedString()
        let one = try #require(
            Aria2Session.request(fromQuery: ["method": "aria2.getVersion", "id": "7", "params": params]))
        let decoded = try JSONDecoder().decode(JSONValue.self, from: one)
        #expect(decoded.object?["id"] == "7" && decoded.object?["params"] == ["token:s3cret"])
        let batch = Data(#"[{"jsonrpc":"2.0","id":1,"method":"system.listMethods"}]"#.utf8)
        #expect(Aria2Session.request(fromQuery: ["params": batch.base64EncodedString()]) == batch)
        #expect(Aria2Session.request(fromQuery: ["method": "m", "id": "1", "params": "%%"]) == nil)
    }

    @Test("Events become aria2's notifications by state; progress and queued ones are not announced")
    func notifications() async throws {
        let url = URL(string: "http://127.0.0.1:1/n.bin")!
        let gid = Aria2Session.gid(of: url)
        await manager.enqueue(url)
        await manager.suspend(url)
        var receipt = try #require(await manager.receipt(for: url))
        #expect(Aria2Session.gid(of: receipt) == gid)
        func method(_ event: DownloadEvent) throws -> String? {
            guard let data = Aria2Session.notification(for: event) else { return nil }
            let value = try JSONDecoder().decode(JSONValue.self, from: data)
            #expect(value.object?["params"]?.array?.first?.object?["gid"]?.string == gid)
            return value.object?["method"]?.string
        }
        #expect(try method(.stateChanged(receipt)) == "aria2.onDownloadPause")
        for (state, expected) in [
            (DownloadState.downloading, "aria2.onDownloadStart"), (.completed, "aria2.onDownloadComplete"),
            (.failed, "aria2.onDownloadError"),
        ] {
            receipt.state = state
            #expect(try method(.stateChanged(receipt)) == expected)
        }
        receipt.state = .queued
        #expect(try method(.stateChanged(receipt)) == nil)
        #expect(try method(.progress(receipt)) == nil)
        #expect(try method(.removed(url)) == "aria2.onDownloadStop")
    }
}

/// A TCP socket: `SOCK_STREAM` is an `Int32` on Darwin and an enum of Glibc's.
private func tcpSocket() -> Int32 {
    #if canImport(Darwin)
        return socket(AF_INET, SOCK_STREAM, 0)
    #else
        return socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #endif
}
