import Foundation
import Testing

@testable import Downloader

/// The expected checksums a download keeps (issue #32): the rules of `StateMachine.request` for them, without sockets.
@Suite("DownloadManager.StateMachine expectations")
struct DownloadManagerStateMachineExpectationTests {
    typealias Machine = DownloadManager.StateMachine<String>

    static let md5A = Checksum(md5: String(repeating: "a", count: 32))!
    static let md5B = Checksum(md5: String(repeating: "b", count: 32))!
    static let sha = Checksum(algorithm: .sha256, hexString: String(repeating: "c", count: 64))!

    func startExpectation(_ actions: [Machine.Action]) -> Checksum?? {
        for case .start(_, _, let start) in actions { return .some(start.expectation) }
        return nil
    }

    @Test("A restored download continues with its own expectation when asked without one")
    func restoredExpectation() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        machine.restore("a", state: .suspended, checksum: nil, expectations: .init(own: Self.sha, others: [Self.md5A]))
        #expect(machine.expectations(of: "a").all == [Self.sha, Self.md5A])
        #expect(
            startExpectation(machine.request("a", expectation: nil, waiter: 1, completedFileIsIntact: false))
                == Self.sha)
        #expect(machine.expectations(of: "a").all == [Self.sha, Self.md5A])
        // Complete with the SHA-256 it verified: the MD5 nobody waits for is compared by reading the file.
        let ended = machine.transferEnded("a", generation: 1, .completed(Self.sha))
        #expect(ended.contains(.verify("a", Self.md5A)) && ended.contains(.succeed([1], "a")))
        #expect(
            machine.verified("a", expectation: Self.md5A, actual: Self.md5B) == [
                .warn("a", .mismatch(expected: Self.md5A, actual: Self.md5B))
            ])
        #expect(machine.expectations(of: "a").all == [Self.sha])
    }

    @Test("A request whose destination or file name contradicts a download underway is refused; a resting one takes it")
    func contradictingOptions() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        _ = machine.request("a", expectation: nil, waiter: 1, completedFileIsIntact: false)  // running
        _ = machine.request("b", expectation: nil, waiter: 2, completedFileIsIntact: false)  // queued
        for key in ["a", "b"] {
            #expect(
                machine.request(key, expectation: nil, waiter: 3, completedFileIsIntact: false, contradiction: "x")
                    == [.fail([3], key, .conflictingOptions("x"))])
            #expect(
                machine.request(key, expectation: nil, waiter: nil, completedFileIsIntact: false, contradiction: "x")
                    == [.warn(key, .conflictingOptions("x"))])
        }
        // Suspended: the request's options become the download's (adoptOptions), nothing is refused.
        _ = machine.suspend("b")
        let resumed = machine.request(
            "b", expectation: nil, waiter: 4, completedFileIsIntact: false, contradiction: "x")
        #expect(resumed.contains(.adoptOptions("b", fresh: false)) && resumed.contains(.publish("b", .queued)))
    }

    @Test("A request whose expectation contradicts the download's own is refused and changes nothing")
    func contradictionRefused() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        machine.restore("a", state: .suspended, checksum: nil, expectations: .init(own: Self.md5A))
        #expect(
            machine.request("a", expectation: Self.md5B, priority: 2, waiter: 1, completedFileIsIntact: false) == [
                .fail([1], "a", .conflict(kept: Self.md5A, requested: Self.md5B))
            ])
        #expect(machine.state(of: "a") == .suspended && machine.expectations(of: "a").all == [Self.md5A])
        // Without a waiter it is a warning; running, the same.
        _ = machine.request("a", expectation: nil, waiter: 2, completedFileIsIntact: false)
        #expect(
            machine.request("a", expectation: Self.md5B, waiter: nil, completedFileIsIntact: false) == [
                .warn("a", .conflict(kept: Self.md5A, requested: Self.md5B))
            ])
        // Another algorithm joins beside it.
        #expect(machine.request("a", expectation: Self.sha, waiter: nil, completedFileIsIntact: false).isEmpty)
        #expect(machine.expectations(of: "a").all == [Self.md5A, Self.sha])
    }

    @Test("A waiting download without an expectation takes the first one asked; a running one compares it at the end")
    func expectationJoins() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        _ = machine.request("busy", expectation: nil, waiter: nil, completedFileIsIntact: false)
        _ = machine.request("a", expectation: nil, waiter: nil, completedFileIsIntact: false)
        _ = machine.request("a", expectation: Self.md5A, waiter: nil, completedFileIsIntact: false)
        #expect(machine.expectations(of: "a").all == [Self.md5A])
        let started = machine.transferEnded("busy", generation: 1, .completed(nil))
        #expect(startExpectation(started) == Self.md5A)

        _ = machine.request("b", expectation: nil, waiter: nil, completedFileIsIntact: false)
        let bStarted = machine.transferEnded("a", generation: 2, .completed(Self.md5A))
        #expect(startExpectation(bStarted) == .some(nil))
        _ = machine.request("b", expectation: Self.md5B, waiter: nil, completedFileIsIntact: false)
        #expect(machine.expectations(of: "b").all == [Self.md5B], "kept beside: the running transfer verifies nothing")
        let ended = machine.transferEnded("b", generation: 3, .completed(Self.md5A))
        #expect(ended.contains(.warn("b", .mismatch(expected: Self.md5B, actual: Self.md5A))))
    }

    @Test("A failed download asked again with an expectation starts a new attempt with that one only")
    func failedTakesTheNewExpectation() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        machine.restore("a", state: .failed, checksum: nil, expectations: .init(own: Self.sha))
        #expect(
            startExpectation(machine.request("a", expectation: Self.md5A, waiter: 1, completedFileIsIntact: false))
                == Self.md5A)
        #expect(machine.expectations(of: "a").all == [Self.md5A])
        _ = machine.transferEnded("a", generation: 1, .failed(.connectionFailed))
        // Without one, the new attempt keeps the expectation of the last.
        #expect(
            startExpectation(machine.request("a", expectation: nil, waiter: 2, completedFileIsIntact: false))
                == Self.md5A)
    }
}

extension DownloadManagerStateMachineExpectationTests {
    @Test("A caller's suspend while the completed file is hashed for a new expectation holds: the newer version waits")
    func suspendWhileVerifying() {
        // Found by the model-based test (seed 33 with batches): `enqueue` with a SHA-256 for a file completed with an
        // MD5, then `suspendAll` while the file was hashed; the mismatch then fetched the newer version anyway, and a
        // restart marked the caller's pause as interrupted.
        var machine = Machine(limit: 1, prioritization: .fifo)
        machine.restore("a", state: .completed, checksum: Self.md5A)
        let asked = machine.request("a", expectation: Self.sha, waiter: 1, completedFileIsIntact: true)
        #expect(asked.contains(.verify("a", Self.sha)), "\(asked)")
        _ = machine.suspend("a")
        let other = Checksum(algorithm: .sha256, hexString: String(repeating: "d", count: 64))!
        let verified = machine.verified("a", expectation: Self.sha, actual: other)
        #expect(startExpectation(verified) == nil, "nothing starts after the caller's pause: \(verified)")
        #expect(verified.contains(.fail([1], "a", .suspended)))
        #expect(machine.state(of: "a") == .suspended && !machine.isInterrupted("a"))
        // A resume fetches the newer version, replacing the completed file once verified.
        let resumed = machine.resume("a")
        #expect(startExpectation(resumed) == Self.sha, "\(resumed)")
        for case .start(_, _, let start) in resumed { #expect(start.replacesCompletedFile) }
    }

    @Test("A request after the pause lifts it, as for any suspended download")
    func requestAfterPauseWhileVerifying() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        machine.restore("a", state: .completed, checksum: Self.md5A)
        _ = machine.request("a", expectation: Self.sha, waiter: 1, completedFileIsIntact: true)
        _ = machine.suspend("a")
        _ = machine.request("a", expectation: Self.sha, waiter: 2, completedFileIsIntact: true)
        let other = Checksum(algorithm: .sha256, hexString: String(repeating: "d", count: 64))!
        #expect(startExpectation(machine.verified("a", expectation: Self.sha, actual: other)) == Self.sha)
    }
}
