import Foundation
import Testing

@testable import Downloader

/// The transfer's decisions rule by rule, without sockets or files: each test feeds events and checks the actions.
@Suite("Transfer.StateMachine")
struct TransferStateMachineTests {
    typealias Machine = Transfer.StateMachine

    static let url = URL(string: "http://example.test/file.bin")!
    static let base: Int64 = 1 << 20

    static var settings: Machine.Settings {
        var configuration = Transfer.Configuration()
        configuration.windowSize = base
        configuration.maximumWindowSize = 16 * base
        configuration.firstWindowSize = 16 << 10
        configuration.minimumSegmentSize = 4 << 20
        return Machine.Settings(configuration)
    }

    /// A machine whose partial file holds `offset` bytes of a resource described by the arguments.
    static func machine(
        offset: Int64 = 0, total: Int64? = 64 << 20, etag: String? = "\"v1\"", connections: Int = 1,
        primed: Bool = false
    ) -> Machine {
        var position = TransferPosition()
        position.metadata.totalLength = total
        position.metadata.validators.etag = etag
        position.resume(at: offset)
        return Machine(
            url: url, settings: settings, position: position, connections: connections, connectionPrimed: primed)
    }

    /// The window of a `.request`, or a recorded issue.
    static func window(_ action: Machine.Action, sourceLocation: SourceLocation = #_sourceLocation) -> Machine.Window? {
        guard case .request(let window) = action else {
            Issue.record("expected a request, got \(action)", sourceLocation: sourceLocation)
            return nil
        }
        return window
    }

    /// Ends the current window as the server would: all of it arrived (or `received` bytes), from `answeredBy`.
    static func finish(
        _ machine: inout Machine, _ window: Machine.Window, received: Int64? = nil, answeredBy: URL? = nil,
        peakUnwritten: Int64 = 0
    ) -> Machine.Action {
        var position = machine.position
        let count = received ?? window.length ?? (position.metadata.totalLength ?? 0)
        position.resume(at: window.start + count)
        let report = Machine.Report(
            position: position, respondingURL: answeredBy ?? url, isWholeStream: window.end == nil,
            received: count + Int64(window.overlap), peakUnwritten: peakUnwritten)
        return machine.requestEnded(.finished, report: report)
    }

    /// Ends the current window with `end`, no byte accepted.
    static func end(_ machine: inout Machine, _ end: RequestEnd, otherVersion: Bool = false) -> Machine.Action {
        machine.requestEnded(end, report: .init(position: machine.position, isOtherVersion: otherVersion))
    }

    @Test("A fresh download's first request asks a whole window, cut short when slow; later new connections are short")
    func firstWindow() throws {
        var cold = Self.machine()
        let whole = try #require(Self.window(cold.next(warmConnection: false)))
        #expect(whole.start == 0 && whole.end == Self.base - 1 && whole.ifRange == nil && whole.overlap == 0)
        #expect(whole.cutWhenSlow && whole.target == nil && whole.unwrittenLimit == nil)
        // Cut short after 100 KiB: kept, saved, and the rest opens another connection with a short request.
        var position = cold.position
        position.resume(at: 100 << 10)
        let cut = cold.requestEnded(.cutShort, report: .init(position: position, received: 100 << 10))
        guard case .drainThenCheckpoint(let metadata) = cut, metadata.totalLength == 64 << 20 else {
            Issue.record("a cut window is written and saved before the next request, got \(cut)")
            return
        }
        #expect(cold.diskPassedMark(failure: nil) == .proceed)
        let short = try #require(Self.window(cold.next(warmConnection: false)))
        #expect(short.start == 100 << 10 && short.end == (100 << 10) + (16 << 10) - 1 && !short.cutWhenSlow)
        #expect(short.ifRange == "\"v1\"")
        _ = Self.finish(&cold, short)
        #expect(cold.diskPassedMark(failure: nil) == .proceed)
        let full = try #require(Self.window(cold.next(warmConnection: false)))
        #expect(full.length == Self.base && !full.cutWhenSlow, "the connection is open now")

        var warm = Self.machine()
        let reused = try #require(Self.window(warm.next(warmConnection: true)))
        #expect(reused.end == Self.base - 1 && !reused.cutWhenSlow, "no spin on a reused connection")

        var segmented = Self.machine(connections: 4)
        let first = try #require(Self.window(segmented.next(warmConnection: false)))
        #expect(first.end == (16 << 10) - 1 && !first.cutWhenSlow, "segments want the length early")

        var configuration = Transfer.Configuration(windowSize: Self.base, firstWindowSize: 16 << 10)
        configuration.firstRequestBudget = nil
        var position0 = TransferPosition()
        position0.metadata.totalLength = 64 << 20
        var withoutBudget = Machine(
            url: Self.url, settings: Machine.Settings(configuration), position: position0, connections: 1,
            connectionPrimed: false)
        let plain = try #require(Self.window(withoutBudget.next(warmConnection: false)))
        #expect(plain.end == (16 << 10) - 1 && !plain.cutWhenSlow)
    }

    @Test("Windows the disk keeps up with grow four times up to the maximum; a grown one that falls behind resets")
    func windowsGrow() throws {
        var machine = Self.machine(primed: true)
        var lengths: [Int64] = []
        for _ in 0..<4 {
            let window = try #require(Self.window(machine.next(warmConnection: true)))
            lengths.append(window.length ?? 0)
            #expect(window.unwrittenLimit == (window.length! > Self.base ? Self.base * 3 / 2 : nil))
            guard case .waitForDisk(let checkpoint) = Self.finish(&machine, window) else {
                Issue.record("a finished window waits for the disk")
                return
            }
            #expect(checkpoint != nil, "a window that is not the last saves the state")
            #expect(!machine.isWholeAfterDisk)
            #expect(machine.diskPassedMark(failure: nil) == .proceed)
        }
        #expect(lengths == [Self.base, 4 * Self.base, 16 * Self.base, 16 * Self.base])

        // A window during which half a base window waited for the disk does not grow the next.
        let window = try #require(Self.window(machine.next(warmConnection: true)))
        guard case .drainThenCheckpoint = Self.end(&machine, .diskBehind) else {
            Issue.record("a grown window cut short drains, then checkpoints")
            return
        }
        #expect(machine.diskPassedMark(failure: nil) == .proceed)
        #expect(Self.window(machine.next(warmConnection: true))?.length == Self.base)
        _ = window
    }

    @Test("A continuation with a strong ETag sends If-Range; without one it asks the bytes before the cut again")
    func continuations() throws {
        var strong = Self.machine(offset: 3 << 20, primed: true)
        let withETag = try #require(Self.window(strong.next(warmConnection: false)))
        #expect(withETag.start == 3 << 20 && withETag.ifRange == "\"v1\"" && withETag.overlap == 0)

        var weak = Self.machine(offset: 3 << 20, etag: "W/\"v1\"", primed: true)
        let withoutETag = try #require(Self.window(weak.next(warmConnection: false)))
        #expect(withoutETag.overlap == Transfer.continuityCheckLength)
        #expect(withoutETag.requestStart == (3 << 20) - Int64(Transfer.continuityCheckLength))
        #expect(withoutETag.ifRange == nil)
    }

    @Test("Windows go to the redirect target; 403 there and any restart send the next back to the URL itself")
    func redirects() throws {
        let cdn = URL(string: "http://cdn.example.test/signed?sig=1")!
        var machine = Self.machine(primed: true)
        var window = try #require(Self.window(machine.next(warmConnection: true)))
        _ = Self.finish(&machine, window, answeredBy: cdn)
        _ = machine.diskPassedMark(failure: nil)
        window = try #require(Self.window(machine.next(warmConnection: true)))
        #expect(window.target == cdn)

        #expect(Self.end(&machine, .failed(.httpStatus(403, url: cdn))) == .proceed)
        window = try #require(Self.window(machine.next(warmConnection: true)))
        #expect(window.target == nil)

        _ = Self.finish(&machine, window, answeredBy: cdn)
        _ = machine.diskPassedMark(failure: nil)
        _ = try #require(Self.window(machine.next(warmConnection: true)))
        guard case .startOver = Self.end(&machine, .restartFromZero(reason: "changed")) else {
            Issue.record("a changed resource starts over")
            return
        }
        window = try #require(Self.window(machine.next(warmConnection: true)))
        #expect(window.target == nil && window.start == 0)

        // Another error at the target is the download's error.
        _ = Self.finish(&machine, window, answeredBy: cdn)
        _ = machine.diskPassedMark(failure: nil)
        _ = try #require(Self.window(machine.next(warmConnection: true)))
        guard case .stop(let error) = Self.end(&machine, .failed(.httpStatus(500, url: cdn))) else {
            Issue.record("a 500 stops the run (the manager retries)")
            return
        }
        #expect(error.statusCode == 500)
    }

    @Test("A resource that changes more often than the restart limit fails with fileChanged and its file discarded")
    func restartLimit() throws {
        var machine = Self.machine(offset: 1 << 20, primed: true)
        for restart in 1...3 {
            _ = try #require(Self.window(machine.next(warmConnection: true)))
            guard case .startOver(let announced, let metadata, _) = Self.end(&machine, .restartFromZero(reason: "new"))
            else {
                Issue.record("restart \(restart) starts over")
                return
            }
            #expect(announced.isEmpty && metadata.totalLength == nil && machine.position.offset == 0)
        }
        _ = try #require(Self.window(machine.next(warmConnection: true)))
        guard case .discard(let error) = Self.end(&machine, .restartFromZero(reason: "new")) else {
            Issue.record("the fourth change gives up")
            return
        }
        #expect(error == .fileChanged && machine.isFinished)
    }

    @Test("416: complete at the offset verifies; for bytes the resource has, ranges are given up once")
    func unsatisfiable() throws {
        var complete = Self.machine(offset: 5 << 20, total: nil, primed: true)
        _ = try #require(Self.window(complete.next(warmConnection: true)))
        #expect(Self.end(&complete, .unsatisfiable(completeLength: 5 << 20)) == .verify)
        #expect(complete.position.metadata.totalLength == 5 << 20)

        var broken = Self.machine(offset: 0, total: 8 << 20, primed: true)
        _ = try #require(Self.window(broken.next(warmConnection: true)))
        guard case .warn = Self.end(&broken, .unsatisfiable(completeLength: 8 << 20)) else {
            Issue.record("ranges are given up with a warning")
            return
        }
        let whole = try #require(Self.window(broken.next(warmConnection: true)))
        #expect(whole.end == nil && whole.start == 0, "no Range header")
        guard case .stop(let error) = Self.end(&broken, .wholeWithoutRanges(reason: "again")) else {
            Issue.record("a second time is an error")
            return
        }
        #expect(error == .invalidResponse)
    }

    @Test("ETags that flap with the same bytes are dropped with a warning, and the file goes on with one connection")
    func unreliableETag() throws {
        var flapping = Self.machine(offset: 1 << 20, total: 1 << 22, connections: 1, primed: true)
        _ = try #require(Self.window(flapping.next(warmConnection: true)))
        guard case .warn = Self.end(&flapping, .unreliableETag(reason: "backends disagree")) else {
            Issue.record("a warning")
            return
        }
        let next = try #require(Self.window(flapping.next(warmConnection: true)))
        #expect(next.ifRange == nil && next.overlap > 0 && flapping.connections == 1)
        #expect(flapping.position.metadata.ignoresETag)
    }

    @Test("A short window of a resource of unknown length is its end, once the disk has it")
    func unknownLengthEnds() throws {
        var machine = Self.machine(total: nil, primed: true)
        let window = try #require(Self.window(machine.next(warmConnection: true)))
        guard case .waitForDisk = Self.finish(&machine, window, received: 1000) else {
            Issue.record("waits for the disk")
            return
        }
        #expect(machine.isWholeAfterDisk)
        #expect(machine.diskPassedMark(failure: nil) == .verify)
        #expect(machine.position.metadata.totalLength == 1000)
    }

    @Test("A wrong digest fetches the file once more from byte 0; a second is the answer, and the file is discarded")
    func digestMismatch() throws {
        let mismatch = DownloadError.checksumMismatch(Self.url, expected: "a", actual: "b")
        var machine = Self.machine(offset: 64 << 20, primed: true)
        #expect(machine.next(warmConnection: true) == .verify)
        guard case .startOver(_, let metadata, _) = machine.digestChecked(mismatch: mismatch) else {
            Issue.record("starts over once")
            return
        }
        #expect(metadata.restartedAfterMismatch && machine.position.offset == 0 && machine.restarts == 0)
        var window = try #require(Self.window(machine.next(warmConnection: true)))
        while window.end.map({ $0 < (64 << 20) - 1 }) ?? false {
            _ = Self.finish(&machine, window)
            #expect(machine.diskPassedMark(failure: nil) == .proceed)
            window = try #require(Self.window(machine.next(warmConnection: true)))
        }
        _ = Self.finish(&machine, window)
        #expect(machine.diskPassedMark(failure: nil) == .proceed)
        #expect(machine.next(warmConnection: true) == .verify)
        guard case .discard(let error) = machine.digestChecked(mismatch: mismatch) else {
            Issue.record("a second mismatch discards the file")
            return
        }
        #expect(error == .checksumMismatch)
    }

    @Test("After a stop nothing is requested: a cancelled run, a disk failure")
    func nothingAfterStop() throws {
        var machine = Self.machine(primed: true)
        let window = try #require(Self.window(machine.next(warmConnection: true)))
        _ = Self.finish(&machine, window)
        guard case .stop(let error) = machine.diskPassedMark(failure: .fileSystem(nil, reason: "full")) else {
            Issue.record("a disk failure stops")
            return
        }
        #expect(error == .fileSystem && machine.isFinished)
        #expect(machine.cancel() == .stop(.cancelled(Self.url)))

        var cancelled = Self.machine()
        #expect(cancelled.cancel() == .stop(.cancelled(Self.url)))
        #expect(cancelled.isFinished)
    }

    @Test(
        "A failed request goes on from the next mirror at the same offset; the disk's or the caller's failures do not")
    func mirrors() throws {
        let mirror = URL(string: "http://mirror.test/file.bin")!
        var position = TransferPosition()
        position.metadata.totalLength = 64 << 20
        position.metadata.validators.etag = "\"v1\""
        position.resume(at: 2 << 20)
        var machine = Machine(
            url: Self.url, mirrors: [mirror], settings: Self.settings, position: position, connections: 1,
            connectionPrimed: true)
        _ = try #require(Self.window(machine.next(warmConnection: true)))
        guard case .warn = Self.end(&machine, .failed(.hostNotFound(Self.url, reason: "no such host", underlying: nil)))
        else {
            Issue.record("a permanent error on the URL goes on from the mirror")
            return
        }
        let window = try #require(Self.window(machine.next(warmConnection: false)))
        #expect(window.target == mirror && window.start == 2 << 20 && window.ifRange == "\"v1\"")
        #expect(window.sameVersionOnly && window.end == (16 << 10) + (2 << 20) - 1, "a new connection: short")
        guard case .stop(let error) = Self.end(&machine, .failed(.httpStatus(404, url: mirror))) else {
            Issue.record("no mirror left: the error stands")
            return
        }
        #expect(error.statusCode == 404)

        var disk = Machine(
            url: Self.url, mirrors: [mirror], settings: Self.settings, position: position, connections: 1,
            connectionPrimed: true)
        _ = try #require(Self.window(disk.next(warmConnection: true)))
        #expect(Self.end(&disk, .failed(.fileSystem(nil, reason: "full"))) == .stop(.fileSystem(nil, reason: "")))

        // With an expected checksum a mirror's other validators are accepted: the bytes before the cut are compared.
        var checked = Machine(
            url: Self.url, mirrors: [mirror], hasExpectation: true, settings: Self.settings, position: position,
            connections: 1, connectionPrimed: true)
        _ = try #require(Self.window(checked.next(warmConnection: true)))
        _ = Self.end(&checked, .failed(.connectionFailed(Self.url, reason: "reset")))
        let continued = try #require(Self.window(checked.next(warmConnection: true)))
        #expect(!continued.sameVersionOnly && continued.ifRange == nil && continued.overlap > 0)
    }

    @Test("The last window and a small file save no state; a segmented fetch that falls back restarts on one")
    func checkpointsAndFallBack() throws {
        var small = Self.machine(total: 200 << 10, primed: true)
        let window = try #require(Self.window(small.next(warmConnection: true)))
        #expect(Self.finish(&small, window) == .waitForDisk(checkpoint: nil))

        var segmented = Self.machine(offset: 1 << 20, connections: 4, primed: true)
        #expect(segmented.next(warmConnection: true) == .fetchSegments(connections: 4))
        let first = TransferStateMachineSegmentsTests.requests(segmented.startSegments())
        #expect(first.count == 4)
        #expect(segmented.segmentEnded(connection: 0, end: .wholeWithoutRanges(reason: "200"), received: 0).count == 1)
        for request in first.dropFirst() {
            _ = segmented.segmentEnded(connection: request.connection, end: .cancelled, received: 0)
        }
        guard case .startOver = segmented.segmentsEnded() else {
            Issue.record("a fallback starts over")
            return
        }
        #expect(segmented.connections == 1 && segmented.restarts == 1)
        #expect(Self.window(segmented.next(warmConnection: true))?.start == 0)
    }
}
