import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

extension TransferTests {
    /// A progress callback that stops the disk while the server is answering a request: until that response has
    /// ended, everything it sends waits in memory. It runs on the disk queue after each batch, so the next batch waits.
    /// A deadline keeps a broken engine from hanging the test (it then fails its assertions instead).
    func diskStoppedWhileResponding() -> @Sendable (Int64, Int64?) -> Void {
        { [server] _, _ in
            let deadline = TestTime.deadline(in: .seconds(30))
            while server.statistics.activeRequests > 0 && ContinuousClock.now < deadline {
                usleep(500)  // polling an event with a deadline, not a delay
            }
        }
    }

    /// Like `diskStoppedWhileResponding`, with the overlap made by events: a response to a `paced=1` URL sends its
    /// first chunk, then waits until the disk has stopped, so everything after that chunk waits in memory however
    /// the threads are scheduled (without it, a disk queue that woke late could take most of a body in one batch
    /// before stopping, and the body never exceeded the limit the test is about).
    func diskStopsEachResponse() -> @Sendable (Int64, Int64?) -> Void {
        let stopped = Locked(false)
        server.setBeforeChunk { _, sent in
            guard sent > 0 else { return }
            let deadline = TestTime.deadline(in: .seconds(30))
            while !stopped.withLock({ $0 }) && ContinuousClock.now < deadline {
                usleep(500)  // polling an event with a deadline, not a delay
            }
        }
        let stop = diskStoppedWhileResponding()
        return { written, total in
            stopped.withLock { $0 = true }
            stop(written, total)
            stopped.withLock { $0 = false }
        }
    }

    @Test("A disk slower than the network holds at most one and a half windows in memory")
    func memoryBoundedBySlowDisk() async throws {
        // URLSession on Linux has no backpressure: a request's whole body arrives as fast as the network allows. The
        // bound comes from the windows: the next request starts only once the disk is past the middle of this one.
        // The disk stops while a response is in flight, so each window waits whole in memory: the worst case. Windows
        // of one size: a window whose response ended before the disk's first batch would let the next one grow, and a
        // grown window has its own bound (`grownWindowCut`).
        let window: Int64 = 512 << 10
        let size = 8 << 20
        let content = TestContent(name: "slowdisk", size: size)
        let transfer = Transfer(
            url: server.url("/bytes/slowdisk?size=\(size)&paced=1"), options: DownloadOptions(), directory: directory,
            bridge: bridge,
            configuration: .init(
                windowSize: window, maximumWindowSize: window, firstWindowSize: 64 << 10, firstRequestBudget: nil),
            progress: diskStopsEachResponse())
        let result = try await transfer.run()
        #expect(result.md5 == content.md5)
        #expect(
            result.peakBufferedBytes <= window * 3 / 2 + (64 << 10),
            "bytes waited for the disk beyond the bound of 1.5 windows")
        // The disk really was the slower side (otherwise the bound above proves nothing): all of a window but its first
        // chunk waited (the response's first command does not wake the disk: it stops with the first chunk written).
        #expect(result.peakBufferedBytes >= window - (64 << 10))
    }
}

extension TransferTests {
    /// A body the engine cannot split into windows (no length, or Range ignored) streams in one response: what the
    /// disk stages hold in memory must stay bounded however long it is (issue #22). The bound holds by construction:
    /// the hasher holds at most its backlog, and once more than `maximumUnwrittenBytes` wait to be written for longer
    /// than the grace period, or half as much again at once, the response stops. On a machine this test shares with
    /// the rest of the suite the writer can be starved long enough for that, so the documented stop is an accepted
    /// outcome; a wrong file, or more memory, is not.
    @Test(
        "A whole body in one response holds a bounded amount in memory, with or without a length",
        // Under ThreadSanitizer (CI's second run, for races, not memory) one case of 32 MiB, past the hard limit: the
        // two cases of 48 MiB were a fifth of that run's CPU.
        arguments: runsUnderSanitizer ? ["norange=1"] : ["length=none&norange=1", "norange=1"])
    func wholeStreamIsBounded(options: String) async throws {
        let size = runsUnderSanitizer ? 32 << 20 : 128 << 20
        let name = "stream\(options.count)"
        let transfer = Transfer(
            url: server.url("/bytes/\(name)?size=\(size)&\(options)"), options: DownloadOptions(), directory: directory,
            bridge: bridge,
            configuration: .init(windowSize: 8 << 20, firstWindowSize: 64 << 10, firstRequestBudget: nil))
        // Past the soft limit the disk gets a grace period, up to the hard limit (half as much again): the bound.
        let soft = Transfer.Configuration().maximumUnwrittenBytes
        let limit = soft + soft / 2 + (4 << 20) + (1 << 20)
        switch await runTransfer(transfer) {
        case .success(let result):
            let expected = await TestContent(name: name, size: size).md5OffThePool
            #expect(result.md5 == expected)
            #expect(try await TestContent.md5(ofFile: result.fileURL) == expected)
            #expect(result.peakBufferedBytes <= limit, "\(result.peakBufferedBytes) bytes waited in memory")
        case .failure(let error):
            #expect(error == .fileSystem && error.reason.contains("behind the network"), "\(error)")
        }
    }
}

extension TransferTests {
    /// A transfer with a small limit on bytes waiting for the disk, whose disk stops while a response is in flight.
    /// Its URL trickles every response after 2 MiB of body (the rest would take hours): windows are smaller and never
    /// trickle, and a whole body must be cut by the limit, since nothing else ends it (no timing involved). A trickle,
    /// not a stall: data keeps arriving, so libcurl keeps reading the socket.
    func slowDiskTransfer(
        _ path: String, window: Int64, maximumUnwritten: Int64, note: @escaping @Sendable (String) -> Void = { _ in }
    ) -> Transfer {
        var configuration = Transfer.Configuration(
            windowSize: window, firstWindowSize: 16 << 10, firstRequestBudget: nil)
        configuration.maximumUnwrittenBytes = maximumUnwritten
        return Transfer(
            url: server.url(path + "&trickleAfter=\(2 << 20)&paced=1"), options: DownloadOptions(),
            directory: directory, bridge: bridge, configuration: configuration, note: note,
            progress: diskStopsEachResponse())
    }

    @Test("A whole body from a server that ignores Range fails clearly once the disk falls too far behind")
    func wholeStreamTooFarAhead() async throws {
        let limit: Int64 = 1 << 20
        let outcome = await runTransfer(
            slowDiskTransfer("/bytes/ahead?size=\(16 << 20)&norange=1", window: 8 << 20, maximumUnwritten: limit))
        guard case .failure(let error) = outcome else {
            Issue.record("expected the download to stop: \(outcome)")
            return
        }
        #expect(error == .fileSystem && error.reason.contains("behind the network"), "\(error)")
    }

    @Test("A 200 for a changed file from a server that honours Range continues in windows once the disk falls behind")
    func wholeStreamContinuesByRange() async throws {
        let size = 8 << 20
        let limit: Int64 = 1 << 20
        // A new version from the third GET on: that window's If-Range fails, and it is answered 200 with version 1.
        let path = "/bytes/changes?size=\(size)&changeAt=2"
        let notes = Locked<[String]>([])
        let transfer = slowDiskTransfer(path, window: 256 << 10, maximumUnwritten: limit) { message in
            notes.withLock { $0.append(message) }
        }
        let result = try await transfer.run()
        // For the log (issue #35): the response that outran the disk ended early, and it says so.
        #expect(notes.withLock { $0 }.contains { $0.contains("disk fell behind") }, "\(notes.withLock { $0 })")
        let version1 = TestContent(name: "changes", size: size, version: 1).md5
        #expect(result.md5 == version1)
        #expect(try md5OfFile(result.fileURL) == version1)
        let requests = gets("changes")
        #expect(requests.count > 4 && (requests.last?.rangeStart ?? 0) > 0, "the rest came by Range")
        #expect(result.peakBufferedBytes <= limit + (4 << 20) + (1 << 20), "\(result.peakBufferedBytes)")
    }
}

extension TransferTests {
    @Test("A resource that changes with every request, streamed faster than the disk: fileChanged after the restarts")
    func changingStreamEnds() async throws {
        // Each window's If-Range fails (a new version every 2 GETs), the 200 outruns the slow disk and stops, and the
        // next window sees yet another version: without counting these as restarts this looped forever.
        let outcome = await runTransfer(
            slowDiskTransfer("/bytes/flapping?size=\(8 << 20)&change=2", window: 256 << 10, maximumUnwritten: 1 << 20))
        guard case .failure(let error) = outcome else {
            Issue.record("expected fileChanged: \(outcome)")
            return
        }
        #expect(
            error == .fileChanged,
            "\(error) \(server.requests.map { "\($0.method) \($0.range ?? "-") \($0.value(forHeader: "If-Range") ?? "-")" })"
        )
    }
}
