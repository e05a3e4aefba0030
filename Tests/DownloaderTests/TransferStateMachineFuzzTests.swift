import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Seeded random sequences of events through the transfer's state machine, answered by a model server that finishes,
/// drops, changes, refuses and lies at random. After every action: a request starts where the accepted bytes end and
/// never asks again for a byte this version already has (the continuity overlap aside, which only a resource without
/// a strong ETag needs); no window is longer than the maximum, and one longer than the base carries the limit of
/// bytes waiting for the disk (memory in flight stays bounded); restarts stay within the limit; nothing is requested
/// after the machine ended. (That the digest follows the watermark is the disk pipeline's invariant, checked by
/// `DiskPipelineTests`.)
@Suite("Transfer.StateMachine fuzzing")
struct TransferStateMachineFuzzTests {
    typealias Machine = Transfer.StateMachine

    /// One random resource and one run through it.
    static func run(seed: UInt64, seen: inout [String: Int]) {
        var random = SeededGenerator(seed: seed)
        let settings = TransferStateMachineTests.settings
        let url = TransferStateMachineTests.url
        let total: Int64? = Bool.random(using: &random) ? Int64.random(in: 0...(40 << 20), using: &random) : nil
        let etag = ["\"v1\"", "W/\"v1\"", nil].randomElement(using: &random)!
        var position = TransferPosition()
        position.metadata.totalLength = total
        position.metadata.validators.etag = etag
        if let total, Bool.random(using: &random) { position.resume(at: Int64.random(in: 0...total, using: &random)) }
        let mirrors = (0..<Int.random(in: 0...2, using: &random)).map { URL(string: "http://mirror\($0).test/f")! }
        var machine = Machine(
            url: url, mirrors: mirrors, hasExpectation: Bool.random(using: &random), settings: settings,
            position: position, connections: Int.random(in: 1...4, using: &random),
            connectionPrimed: Bool.random(using: &random))
        var action = Machine.Action.proceed
        let context = "seed \(seed)"
        // The model's count of the bytes this version has: what the answers delivered, 0 after a start over.
        var accepted = position.offset
        var requests = 0

        for _ in 0..<400 {
            #expect(machine.restarts <= settings.maximumRestarts, "\(context)")
            switch action {
            case .proceed:
                action =
                    Int.random(in: 0..<50, using: &random) == 0
                    ? machine.cancel() : machine.next(warmConnection: Bool.random(using: &random))
            case .warn, .startOver:
                seen[action.kind, default: 0] += 1
                if case .startOver = action { accepted = 0 }
                action = .proceed
            case .request(let window):
                seen[
                    window.end == nil ? "whole" : window.length! > settings.windowSize ? "grown" : "window", default: 0] +=
                    1
                check(window, machine: machine, accepted: accepted, settings: settings, context: context)
                // Only a run's first request may open a connection with a whole window to be cut short.
                #expect(!window.cutWhenSlow || requests == 0, "\(context)")
                requests += 1
                if window.cutWhenSlow { seen["cuttable", default: 0] += 1 }
                (action, accepted) = answer(window, machine: &machine, random: &random)
            case .fetchSegments:
                seen["segments", default: 0] += 1
                // Each connection's window ends at random (`TransferStateMachineSegmentsTests` checks their rules).
                var pending = machine.startSegments()
                while !pending.isEmpty {
                    switch pending.removeFirst() {
                    case .request(let connection, let range, _, _):
                        let (end, received) = TransferStateMachineSegmentsTests.randomEnd(range, random: &random)
                        pending += machine.segmentEnded(connection: connection, end: end, received: received)
                    case .waitForDisk(let connection, _):
                        pending += machine.segmentDiskPassed(connection: connection, failure: nil)
                    case .warn, .cancelRequests:
                        break
                    }
                }
                action = machine.segmentsEnded()
                accepted = machine.position.offset
            case .waitForDisk, .drainThenCheckpoint:
                seen[action.kind, default: 0] += 1
                let whole = machine.isWholeAfterDisk
                let fails = Int.random(in: 0..<40, using: &random) == 0
                action = machine.diskPassedMark(failure: fails ? .fileSystem(nil, reason: "full") : nil)
                if !fails {
                    // What `Transfer.finish` relies on to take the digest's check in the disk's hop.
                    var probe = machine
                    let then = action == .proceed ? probe.next(warmConnection: false) : action
                    #expect((then == .verify) == whole, "isWholeAfterDisk is \(whole), then \(then): \(context)")
                }
            case .verify:
                seen["verify", default: 0] += 1
                if let total = machine.position.metadata.totalLength {
                    #expect(machine.position.offset == total, "verify only when whole: \(context)")
                }
                let mismatch = Int.random(in: 0..<4, using: &random) == 0
                action = machine.digestChecked(
                    mismatch: mismatch ? .checksumMismatch(url, expected: "a", actual: "b") : nil)
            case .place, .stop, .discard:
                seen[action.kind, default: 0] += 1
                #expect(machine.isFinished, "\(context)")
                // Whatever comes after the end asks for nothing.
                #expect(machine.cancel() == .stop(.cancelled(url)), "\(context)")
                #expect(machine.next(warmConnection: true) == .stop(.cancelled(url)), "\(context)")
                return
            }
        }
    }

    /// The invariants of one request.
    static func check(
        _ window: Machine.Window, machine: Machine, accepted: Int64, settings: Machine.Settings, context: String
    ) {
        let position = machine.position
        #expect(!machine.isFinished, "a request after the end: \(context)")
        #expect(window.start == accepted, "a window starts where the accepted bytes end: \(context)")
        #expect(window.overlap <= Transfer.continuityCheckLength && Int64(window.overlap) <= window.start)
        #expect(window.overlap == 0 || !position.metadata.validators.hasStrongETag, "\(context)")
        #expect(window.start > 0 || window.ifRange == nil, "\(context)")
        // A mirror continues the file only proving the same version, unless a checksum will check it.
        #expect(window.sameVersionOnly == (machine.source > 0 && !machine.hasExpectation && window.start > 0))
        if machine.source > 0 && machine.redirectTarget == nil {
            #expect(window.target == machine.sources[machine.source], "\(context)")
        }
        guard let length = window.length else {
            #expect(
                window.start == 0 && !position.metadata.rangesSupported, "no Range only for a whole fetch: \(context)")
            return
        }
        #expect(length > 0 && length <= settings.maximumWindowSize, "\(length): \(context)")
        if let total = position.metadata.totalLength { #expect(window.end! < total, "\(context)") }
        #expect((window.unwrittenLimit != nil) == (length > settings.windowSize), "\(context)")
        if let limit = window.unwrittenLimit { #expect(limit <= settings.windowSize * 3 / 2) }
    }

    /// The model server's answer to one request.
    /// - Returns: the machine's next action, and how many bytes of this version the file has after the answer.
    static func answer(
        _ window: Machine.Window, machine: inout Machine, random: inout SeededGenerator
    ) -> (Machine.Action, Int64) {
        let url = TransferStateMachineTests.url
        var position = machine.position
        let available =
            position.metadata.totalLength.map { $0 - window.start } ?? Int64.random(in: 0...(32 << 20), using: &random)
        let asked = window.length ?? available
        var report = Machine.Report(position: position)
        let end: RequestEnd
        switch Int.random(in: 0..<20, using: &random) {
        case 0..<9:
            let count = min(asked, available)
            position.resume(at: window.start + count)
            report = .init(
                position: position, respondingURL: Bool.random(using: &random) ? url : URL(string: "http://cdn.test/x"),
                isWholeStream: window.end == nil, received: count + Int64(window.overlap),
                peakUnwritten: Int64.random(in: 0...(asked / 2), using: &random),
                hashFellBehind: Int.random(in: 0..<8, using: &random) == 0)
            end = .finished
        case 9, 10:
            position.resume(at: window.start + Int64.random(in: 0...min(asked, max(0, available)), using: &random))
            report.position = position
            end = .failed(.connectionFailed(url, reason: "reset"))
        case 11: end = .failed(.httpStatus(403, url: url))
        case 12: end = .restartFromZero(reason: "a new version")
        case 13: end = .unsatisfiable(completeLength: Bool.random(using: &random) ? position.metadata.totalLength : nil)
        case 14: end = .wholeWithoutRanges(reason: "a 206 with Content-Encoding")
        case 15: end = .unreliableETag(reason: "backends disagree")
        case 16 where window.cutWhenSlow && window.end != nil:
            position.resume(at: window.start + Int64.random(in: 0...min(asked, max(0, available)), using: &random))
            report.position = position
            end = .cutShort
        case 16, 17:
            position.resume(at: window.start + Int64.random(in: 0...min(asked, max(0, available)), using: &random))
            report.position = position
            report.isOtherVersion = Bool.random(using: &random)
            end = .diskBehind
        case 18: end = .cancelled
        default: end = .failed(.httpStatus(404, url: url))
        }
        return (machine.requestEnded(end, report: report), report.position.offset)
    }

    @Test("Thousands of random events keep every invariant")
    func randomSequences() {
        var seen: [String: Int] = [:]
        for seed in UInt64(1)...2_000 {
            Self.run(seed: seed, seen: &seen)
        }
        // Every path the invariants speak of was taken.
        for kind in [
            "window", "grown", "whole", "cuttable", "segments", "warn", "startOver", "waitForDisk",
            "drainThenCheckpoint", "verify",
            "place", "stop", "discard",
        ] {
            #expect(seen[kind, default: 0] > 0, "never saw \(kind): \(seen)")
        }
    }
}

extension Transfer.StateMachine.Action {
    /// The case's name, for counting.
    var kind: String {
        switch self {
        case .proceed: "proceed"
        case .request: "request"
        case .fetchSegments: "segments"
        case .startOver: "startOver"
        case .warn: "warn"
        case .waitForDisk: "waitForDisk"
        case .drainThenCheckpoint: "drainThenCheckpoint"
        case .verify: "verify"
        case .place: "place"
        case .stop: "stop"
        case .discard: "discard"
        }
    }
}
