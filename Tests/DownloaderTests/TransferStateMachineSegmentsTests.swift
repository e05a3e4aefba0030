import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// A segmented fetch inside the transfer's machine, rule by rule and by seeded random endings: which window each
/// connection asks for, which mirror it asks, and how the fetch ends.
@Suite("Transfer.StateMachine segments")
struct TransferStateMachineSegmentsTests {
    typealias Machine = Transfer.StateMachine
    typealias Action = Machine.SegmentAction

    /// A machine that chose a segmented fetch of a 64 MiB file with 1 MiB on disk, and its first actions.
    static func started(connections: Int = 4, mirrors: [URL] = []) -> (Machine, [Action]) {
        var position = TransferPosition()
        position.metadata.totalLength = 64 << 20
        position.metadata.validators.etag = "\"v1\""
        position.resume(at: 1 << 20)
        var machine = Machine(
            url: TransferStateMachineTests.url, mirrors: mirrors, settings: TransferStateMachineTests.settings,
            position: position, connections: connections, connectionPrimed: true)
        #expect(machine.next(warmConnection: true) == .fetchSegments(connections: connections))
        let actions = machine.startSegments()
        return (machine, actions)
    }

    /// The requests among `actions`.
    static func requests(_ actions: [Action]) -> [(connection: Int, range: Range<Int64>, target: URL?)] {
        actions.compactMap {
            guard case .request(let connection, let range, let target, _) = $0 else { return nil }
            return (connection, range, target)
        }
    }

    @Test("Every connection asks for the next window in file order, with If-Range; the file ends whole and verified")
    func wholeFetch() {
        var (machine, actions) = Self.started()
        #expect(Self.requests(actions).map(\.connection) == [0, 1, 2, 3])
        #expect(actions.allSatisfy { if case .request(_, _, nil, "\"v1\"") = $0 { true } else { false } })
        var asked: [Range<Int64>] = []
        var queue = actions
        while !queue.isEmpty {
            switch queue.removeFirst() {
            case .request(let connection, let range, _, _):
                #expect(range.lowerBound == (asked.last?.upperBound ?? 1 << 20), "in file order, no gap, no overlap")
                asked.append(range)
                let next = machine.segmentEnded(connection: connection, end: .finished, received: Int64(range.count))
                #expect(next == [.waitForDisk(connection: connection, checkpoint: machine.position.metadata)])
                queue += next
            case .waitForDisk(let connection, _):
                queue += machine.segmentDiskPassed(connection: connection, failure: nil)
            case .warn, .cancelRequests:
                Issue.record("nothing went wrong")
            }
            #expect((machine.segments?.busy.count ?? 0) <= 4)
        }
        #expect(asked.last?.upperBound == 64 << 20)
        #expect(machine.segmentsEnded() == .verify)
        #expect(machine.position.offset == 64 << 20 && machine.position.written == nil)
    }

    @Test("After a failed window the others finish theirs, none starts, and the run stops with that failure")
    func failureLetsOthersFinish() {
        var (machine, actions) = Self.started()
        let requests = Self.requests(actions)
        let reset = DownloadError.connectionFailed(TransferStateMachineTests.url, reason: "reset")
        #expect(machine.segmentEnded(connection: 0, end: .failed(reset), received: 100).isEmpty)
        for request in requests.dropFirst() {
            let next = machine.segmentEnded(
                connection: request.connection, end: .finished, received: Int64(request.range.count))
            #expect(next.count == 1)
            #expect(machine.segmentDiskPassed(connection: request.connection, failure: nil).isEmpty, "no new window")
        }
        #expect(machine.segmentsEnded() == .stop(reset))
    }

    @Test("A response of another version cancels the other requests and restarts the file on one connection")
    func fallBackCancels() {
        var (machine, actions) = Self.started()
        let requests = Self.requests(actions)
        let first = machine.segmentEnded(
            connection: 2, end: .restartFromZero(reason: "another ETag"), received: 0)
        #expect(first == [.cancelRequests])
        for request in requests where request.connection != 2 {
            #expect(machine.segmentEnded(connection: request.connection, end: .cancelled, received: 10).isEmpty)
        }
        guard case .startOver(_, let metadata, _) = machine.segmentsEnded() else {
            Issue.record("a fallback starts over")
            return
        }
        #expect(metadata.totalLength == nil && machine.connections == 1 && machine.restarts == 1)
    }

    @Test("Another ETag for the same bytes keeps what arrived: the missing bytes follow on one connection, no ETag")
    func unreliableETagContinues() {
        var (machine, actions) = Self.started()
        let requests = Self.requests(actions)
        // Connection 0 finished its window, connection 2's response came with another ETag, 1 and 3 ended after 10
        // bytes (a lost connection, say).
        let done = requests[0]
        _ = machine.segmentEnded(connection: done.connection, end: .finished, received: Int64(done.range.count))
        _ = machine.segmentDiskPassed(connection: done.connection, failure: nil)
        let more = machine.segments?.plan.inFlight[done.connection]
        // The others are not cancelled: their windows came with the file's ETag.
        #expect(machine.segmentEnded(connection: 2, end: .unreliableETag(reason: "flap"), received: 0).isEmpty)
        for request in requests where request.connection != 0 && request.connection != 2 {
            #expect(machine.segmentEnded(connection: request.connection, end: .cancelled, received: 10).isEmpty)
        }
        if more != nil {  // the window connection 0 took next, cancelled with nothing
            #expect(machine.segmentEnded(connection: done.connection, end: .cancelled, received: 0).isEmpty)
        }
        #expect(machine.segmentsEnded() == .warn("flap"))
        #expect(machine.connections == 1 && machine.restarts == 0 && machine.position.metadata.validators.etag == nil)
        // Nothing that arrived is asked for again: the first window, and 10 bytes of windows 1 and 3.
        #expect(machine.position.offset == done.range.upperBound + 10)
        let missing = machine.position.missing(total: 64 << 20)
        #expect(missing.allSatisfy { gap in !gap.overlaps(done.range) })
        #expect(missing.reduce(0) { $0 + Int64($1.count) } == (63 << 20) - Int64(done.range.count) - 20)
        #expect(machine.next(warmConnection: true) == .fetchSegments(connections: 1))
    }

    @Test("A mirror that fails is left out with a warning, and its window's rest goes first to the URL")
    func failingMirror() throws {
        let mirror = URL(string: "http://mirror.test/file.bin")!
        var (machine, actions) = Self.started(connections: 2, mirrors: [mirror])
        let requests = Self.requests(actions)
        #expect(requests.map(\.target) == [nil, mirror])
        let lost = try #require(requests.last)
        let next = machine.segmentEnded(
            connection: 1, end: .failed(.httpStatus(503, url: mirror)), received: 4096)
        guard next.count == 2, case .warn(let warning) = next[0], case .request(1, let range, nil, _) = next[1] else {
            Issue.record("a warning, then the rest from the URL: \(next)")
            return
        }
        #expect(warning.contains("mirror.test") && range.lowerBound == lost.range.lowerBound + 4096)
        #expect(machine.segments?.dropped == [1])
    }

    @Test("A disk failure ends the fetch with that failure")
    func diskFailure() {
        var (machine, actions) = Self.started(connections: 2)
        for request in Self.requests(actions) {
            _ = machine.segmentEnded(
                connection: request.connection, end: .finished, received: Int64(request.range.count))
        }
        let full = DownloadError.fileSystem(nil, reason: "full")
        #expect(machine.segmentDiskPassed(connection: 0, failure: full).isEmpty)
        #expect(machine.segmentDiskPassed(connection: 1, failure: nil).isEmpty, "no new window after the failure")
        #expect(machine.segmentsEnded() == .stop(full))
    }

    @Test("Seeded random endings: never two requests for one byte, nothing after the end, idle means ended")
    func randomEndings() {
        for seed in UInt64(1)...500 {
            var random = SeededGenerator(seed: seed)
            let mirrors = (0..<Int.random(in: 0...2, using: &random)).map { URL(string: "http://m\($0).test/f")! }
            var (machine, queue) = Self.started(connections: Int.random(in: 2...6, using: &random), mirrors: mirrors)
            var inFlight: [Int: Range<Int64>] = [:]
            var done: [Range<Int64>] = []
            while !queue.isEmpty {
                let index = Int.random(in: 0..<queue.count, using: &random)
                switch queue.remove(at: index) {
                case .request(let connection, let range, _, _):
                    #expect(inFlight[connection] == nil, "one window per connection: seed \(seed)")
                    let overlaps = (Array(inFlight.values) + done).contains { $0.overlaps(range) }
                    #expect(!overlaps, "a byte asked twice: seed \(seed)")
                    inFlight[connection] = range
                    let (end, received) = Self.randomEnd(range, random: &random)
                    inFlight[connection] = nil
                    if case .finished = end {
                        done.append(range)
                    } else if received > 0 {
                        done.append(range.lowerBound..<range.lowerBound + received)
                    }
                    queue += Self.checked(
                        machine.segmentEnded(connection: connection, end: end, received: received), machine, seed)
                case .waitForDisk(let connection, _):
                    let fails = Int.random(in: 0..<30, using: &random) == 0
                    let next = machine.segmentDiskPassed(
                        connection: connection, failure: fails ? .fileSystem(nil, reason: "full") : nil)
                    queue += Self.checked(next, machine, seed)
                case .warn, .cancelRequests:
                    break
                }
            }
            #expect(machine.segments?.busy.isEmpty == true, "idle once no action is pending: seed \(seed)")
            let finished = machine.segments?.outcome == nil
            let action = machine.segmentsEnded()
            #expect(finished == (action == .verify), "seed \(seed): \(action)")
            if finished {
                let covered = done.reduce(Int64(0)) { $0 + Int64($1.count) }
                #expect(covered == (63 << 20), "every missing byte once: seed \(seed)")
            }
        }
    }

    /// The actions of one event, checked: once the fetch has an outcome, no new window starts.
    static func checked(_ actions: [Action], _ machine: Machine, _ seed: UInt64) -> [Action] {
        if machine.segments?.outcome != nil {
            #expect(requests(actions).isEmpty, "a request after the end: seed \(seed)")
        }
        return actions
    }

    /// How the model server answers one window: mostly whole, sometimes failing part way, rarely another version.
    static func randomEnd(_ range: Range<Int64>, random: inout SeededGenerator) -> (RequestEnd, Int64) {
        let part = Int64.random(in: 0...Int64(range.count), using: &random)
        switch Int.random(in: 0..<40, using: &random) {
        case 0: return (.restartFromZero(reason: "another version"), 0)
        case 1: return (.cancelled, part)
        case 2, 3: return (.failed(.connectionFailed(TransferStateMachineTests.url, reason: "reset")), part)
        default: return (.finished, Int64(range.count))
        }
    }
}
