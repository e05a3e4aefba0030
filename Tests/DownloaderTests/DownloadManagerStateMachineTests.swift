import Foundation
import Testing

@testable import Downloader

/// Each transition of the lifecycle state machine, without sockets, files or clocks.
@Suite("DownloadManager.StateMachine")
struct DownloadManagerStateMachineTests {
    typealias Machine = DownloadManager.StateMachine<String>

    static let md5A = Checksum(md5: String(repeating: "a", count: 32))!
    static let md5B = Checksum(md5: String(repeating: "b", count: 32))!

    func starts(_ actions: [Machine.Action]) -> [Machine.Generation] {
        actions.compactMap { if case .start(_, let generation, _) = $0 { return generation } else { return nil } }
    }

    @Test("A request queues, starts within the limit, and completes answering its waiter")
    func requestStartComplete() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        let first = machine.request("a", expectation: nil, waiter: 1, completedFileIsIntact: false)
        #expect(first.contains(.adoptOptions("a", fresh: true)) && first.contains(.publish("a", .queued)))
        #expect(starts(first) == [1] && machine.slotsInUse == 1)
        let second = machine.request("b", expectation: nil, waiter: 2, completedFileIsIntact: false)
        #expect(starts(second).isEmpty && machine.state(of: "b") == .queued)

        let ended = machine.transferEnded("a", generation: 1, .completed(Self.md5A))
        #expect(ended.prefix(3) == [.complete("a", 1), .publish("a", .completed), .succeed([1], "a")])
        #expect(starts(ended) == [2], "the freed slot goes to the next waiting download")
        #expect(machine.state(of: "a") == .completed)
    }

    @Test("Interrupted: what shutdown stops or a crash left running; never a caller's pause, which suspend makes it")
    func interruptions() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        _ = machine.request("running", expectation: nil, waiter: nil, completedFileIsIntact: false)
        _ = machine.request("waiting", expectation: nil, waiter: nil, completedFileIsIntact: false)
        _ = machine.request("paused", expectation: nil, waiter: nil, completedFileIsIntact: false)
        _ = machine.suspend("paused")
        #expect(!["running", "waiting", "paused"].contains { machine.isInterrupted($0) })
        _ = machine.shutdown()
        #expect(machine.isInterrupted("running") && machine.isInterrupted("waiting"))
        #expect(!machine.isInterrupted("paused"))

        var restarted = Machine(limit: 1, prioritization: .fifo)
        restarted.restore("crashed", state: .downloading, checksum: nil)
        restarted.restore("queued", state: .queued, checksum: nil)
        restarted.restore("saved", state: .suspended, checksum: nil, interrupted: true)
        restarted.restore("paused", state: .suspended, checksum: nil)
        restarted.restore("done", state: .completed, checksum: nil, interrupted: true)
        #expect(["crashed", "queued", "saved"].allSatisfy { restarted.isInterrupted($0) })
        #expect(!restarted.isInterrupted("paused") && !restarted.isInterrupted("done"))
        #expect(restarted.suspend("saved") == [.publish("saved", .suspended)], "the receipt learns it is a pause now")
        #expect(!restarted.isInterrupted("saved"))
        _ = restarted.resume("crashed")
        #expect(!restarted.isInterrupted("crashed"), "queued again: not suspended, so not interrupted")
        _ = restarted.suspend("crashed")
        #expect(!restarted.isInterrupted("crashed"))
    }

    @Test("A second request joins: no second transfer, both waiters answered")
    func join() {
        var machine = Machine(limit: 4, prioritization: .fifo)
        _ = machine.request("a", expectation: nil, waiter: 1, completedFileIsIntact: false)
        #expect(machine.request("a", expectation: nil, waiter: 2, completedFileIsIntact: false).isEmpty)
        let ended = machine.transferEnded("a", generation: 1, .completed(nil))
        #expect(ended.contains(.succeed([1, 2], "a")))
    }

    @Test("A joiner expecting another checksum fails with a mismatch; the others succeed")
    func joinerExpectation() {
        var machine = Machine(limit: 4, prioritization: .fifo)
        _ = machine.request("a", expectation: nil, waiter: 1, completedFileIsIntact: false)
        _ = machine.request("a", expectation: Self.md5B, waiter: 2, completedFileIsIntact: false)
        _ = machine.request("a", expectation: Self.md5A, waiter: 3, completedFileIsIntact: false)
        let ended = machine.transferEnded("a", generation: 1, .completed(Self.md5A))
        #expect(ended.contains(.fail([2], "a", .mismatch(expected: Self.md5B, actual: Self.md5A))))
        #expect(ended.contains(.succeed([1, 3], "a")))
    }

    @Test("A joiner whose algorithm was not computed has the file hashed, and fails without a new download")
    func joinerVerification() {
        var machine = Machine(limit: 4, prioritization: .fifo)
        _ = machine.request("a", expectation: nil, waiter: 1, completedFileIsIntact: false)
        _ = machine.request("a", expectation: Self.md5B, waiter: 2, completedFileIsIntact: false)
        let ended = machine.transferEnded("a", generation: 1, .completed(nil))  // hashing was off
        #expect(ended.contains(.verify("a", Self.md5B)) && ended.contains(.succeed([1], "a")))
        let verified = machine.verified("a", expectation: Self.md5B, actual: Self.md5A)
        #expect(verified == [.fail([2], "a", .mismatch(expected: Self.md5B, actual: Self.md5A))])
    }

    @Test("A completed download answers at once when the expectation matches, and downloads again when it differs")
    func completedRequests() {
        var machine = Machine(limit: 4, prioritization: .fifo)
        machine.restore("a", state: .completed, checksum: Self.md5A)
        #expect(
            machine.request("a", expectation: Self.md5A, waiter: 1, completedFileIsIntact: true) == [.succeed([1], "a")]
        )
        let again = machine.request("a", expectation: Self.md5B, waiter: 2, completedFileIsIntact: true)
        guard
            case .start(_, let generation, let start)? = again.first(where: {
                if case .start = $0 { true } else { false }
            })
        else {
            Issue.record("no replacement transfer: \(again)")
            return
        }
        #expect(start == .init(expectation: Self.md5B, replacesCompletedFile: true))
        #expect(
            !again.contains(where: { if case .adoptOptions = $0 { true } else { false } }),
            "the completed download keeps its options")
        // The new version does not match either: the old file stays completed, the caller gets the error.
        let failure = DownloadError.checksumMismatch
        let ended = machine.transferEnded("a", generation: generation, .failed(failure))
        #expect(ended == [.publish("a", .completed), .warn("a", .error(failure)), .fail([2], "a", .error(failure))])
        #expect(machine.state(of: "a") == .completed, "the old file stays the download's: nothing released it")
    }

    @Test("A completed download whose file is gone starts afresh")
    func completedFileGone() {
        var machine = Machine(limit: 4, prioritization: .fifo)
        machine.restore("a", state: .completed, checksum: Self.md5A)
        let actions = machine.request("a", expectation: nil, waiter: 1, completedFileIsIntact: false)
        #expect(starts(actions) == [1] && actions.first == .releaseCompletedFile("a"))
    }

    @Test("Suspend and resume while the transfer stops: the same slot continues, never a second transfer beside it")
    func suspendResumeWhileStopping() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        _ = machine.request("a", expectation: nil, waiter: 1, completedFileIsIntact: false)
        _ = machine.request("b", expectation: nil, waiter: 2, completedFileIsIntact: false)
        #expect(machine.suspend("a") == [.cancel("a", 1), .publish("a", .suspended)])
        #expect(machine.resume("a") == [.publish("a", .downloading)])
        #expect(machine.slotsInUse == 1 && machine.state(of: "b") == .queued)
        let ended = machine.transferEnded("a", generation: 1, .cancelled)
        #expect(starts(ended) == [2] && machine.phase(of: "a") == .running(2), "continued in its own slot")
        #expect(machine.state(of: "b") == .queued)
    }

    @Test("A transfer that completes while it is being suspended counts as completed")
    func completesWhileStopping() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        _ = machine.request("a", expectation: nil, waiter: 1, completedFileIsIntact: false)
        _ = machine.suspend("a")
        _ = machine.resume("a")
        let ended = machine.transferEnded("a", generation: 1, .completed(Self.md5A))
        #expect(ended.contains(.complete("a", 1)) && ended.contains(.succeed([1], "a")))
        #expect(starts(ended).isEmpty && machine.state(of: "a") == .completed)
    }

    @Test("A transfer that completes just as it is suspended counts as completed, and frees its slot")
    func completesWhileSuspending() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        _ = machine.request("a", expectation: nil, waiter: 1, completedFileIsIntact: false)
        _ = machine.request("b", expectation: nil, waiter: 2, completedFileIsIntact: false)
        _ = machine.suspend("a")
        let ended = machine.transferEnded("a", generation: 1, .completed(Self.md5A))
        #expect(ended.prefix(3) == [.complete("a", 1), .publish("a", .completed), .succeed([1], "a")])
        #expect(starts(ended) == [2] && machine.state(of: "a") == .completed)
    }

    @Test("Suspend answers waiters: at once when queued, when the transfer has ended when running")
    func suspendAnswersWaiters() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        _ = machine.request("a", expectation: nil, waiter: 1, completedFileIsIntact: false)
        _ = machine.request("b", expectation: nil, waiter: 2, completedFileIsIntact: false)
        #expect(machine.suspend("b") == [.publish("b", .suspended), .fail([2], "b", .suspended)])
        #expect(!machine.suspend("a").contains { if case .fail = $0 { true } else { false } })
        let ended = machine.transferEnded("a", generation: 1, .cancelled)
        #expect(ended == [.publish("a", .suspended), .fail([1], "a", .suspended)])
    }

    @Test("Remove answers at once; the files go when the transfer has ended; a new request then starts afresh")
    func removeWhileRunning() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        machine.restore("a", state: .completed, checksum: Self.md5A)
        _ = machine.request("a", expectation: Self.md5B, waiter: 1, completedFileIsIntact: true)  // a replacement
        let removed = machine.remove("a")
        #expect(removed == [.fail([1], "a", .removed), .forget("a"), .cancel("a", 1)])
        #expect(machine.state(of: "a") == nil && machine.slotsInUse == 1)
        let again = machine.request("a", expectation: nil, waiter: 2, completedFileIsIntact: false)
        #expect(again == [.adoptOptions("a", fresh: true), .publish("a", .downloading)])
        let ended = machine.transferEnded("a", generation: 1, .completed(Self.md5B))
        #expect(ended.first == .discardFiles("a", producedBy: 1))
        #expect(starts(ended) == [2])
    }

    @Test("A completed file stops being the download's when it is forgotten, and nothing is deleted")
    func completedFileReleased() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        machine.restore("kept", state: .completed, checksum: nil)
        // Its partial file became the completed file: nothing to delete (issue #52; a crash's leftovers are swept
        // when a manager opens the folder).
        #expect(
            machine.remove("kept", keepingCompletedFile: true)
                == [.releaseCompletedFile("kept"), .forget("kept", keepsPlacedFile: true)])
        // A completed download removed with its file: the file is deleted.
        machine.restore(
            "gone", state: .completed, checksum: nil,
            completedFile: DownloadManager.CompletedFile(url: URL(fileURLWithPath: "/tmp/gone.bin"), length: 1))
        #expect(
            machine.remove("gone") == [
                .forget("gone"),
                .discardFiles("gone", producedBy: nil, completedFile: URL(fileURLWithPath: "/tmp/gone.bin")),
            ])
        machine.restore("there", state: .completed, checksum: nil)
        #expect(
            machine.request("there", expectation: nil, waiter: 2, completedFileIsIntact: true) == [
                .succeed([2], "there")
            ])
    }

    @Test("Remove of a resting download deletes its files at once")
    func removeResting() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        machine.restore("a", state: .completed, checksum: nil)
        #expect(
            machine.remove("a") == [.forget("a"), .discardFiles("a", producedBy: nil)])
        #expect(machine.remove("a").isEmpty)
    }

    @Test("A cancelled waiter suspends its download only when nobody else waits")
    func cancelWaiter() {
        var machine = Machine(limit: 2, prioritization: .fifo)
        _ = machine.request("a", expectation: nil, waiter: 1, completedFileIsIntact: false)
        _ = machine.request("a", expectation: nil, waiter: 2, completedFileIsIntact: false)
        #expect(machine.cancelWaiter(1, of: "a") == [.fail([1], "a", .waiterCancelled)])
        #expect(
            machine.cancelWaiter(2, of: "a") == [
                .fail([2], "a", .waiterCancelled), .cancel("a", 1), .publish("a", .suspended),
            ])
        #expect(machine.cancelWaiter(2, of: "a").isEmpty)
    }

    @Test("Priority first, then FIFO or LIFO", arguments: [DownloadPrioritization.fifo, .lifo])
    func order(prioritization: DownloadPrioritization) {
        var machine = Machine(limit: 1, prioritization: prioritization)
        _ = machine.request("busy", expectation: nil, waiter: nil, completedFileIsIntact: false)
        for (name, priority) in [("p0a", 0), ("p5", 5), ("p0b", 0), ("p9", 9)] {
            _ = machine.request(name, expectation: nil, priority: priority, waiter: nil, completedFileIsIntact: false)
        }
        var order: [String] = []
        var running = ("busy", 1)
        for _ in 0..<4 {
            let actions = machine.transferEnded(running.0, generation: running.1, .completed(nil))
            for case .start(let key, let generation, _) in actions { running = (key, generation) }
            order.append(running.0)
        }
        #expect(order == ["p9", "p5"] + (prioritization == .fifo ? ["p0a", "p0b"] : ["p0b", "p0a"]))
    }

    @Test("A higher limit at run time starts more at once; a lower one stops nothing")
    func runtimeLimit() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        for key in ["a", "b", "c"] {
            _ = machine.request(key, expectation: nil, waiter: nil, completedFileIsIntact: false)
        }
        #expect(starts(machine.setLimit(3)) == [2, 3] && machine.slotsInUse == 3)
        #expect(machine.setLimit(1).isEmpty && machine.slotsInUse == 3)
        #expect(starts(machine.transferEnded("a", generation: 1, .completed(nil))).isEmpty)
    }

    @Test("Shutdown answers every waiter, stops every transfer and reports once they have all ended")
    func shutdown() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        _ = machine.request("a", expectation: nil, waiter: 1, completedFileIsIntact: false)
        _ = machine.request("b", expectation: nil, waiter: 2, completedFileIsIntact: false)
        let actions = machine.shutdown()
        #expect(actions.contains(.cancel("a", 1)) && actions.contains(.fail([1], "a", .shutDown)))
        #expect(actions.contains(.fail([2], "b", .shutDown)) && !actions.contains(.shutDownCompleted))
        // A request after it is refused (issue #48): its waiter is told, and so is the log.
        #expect(
            machine.request("c", expectation: nil, waiter: 3, completedFileIsIntact: false) == [
                .warn("c", .afterShutdown), .fail([3], "c", .afterShutdown),
            ])
        #expect(
            machine.request("d", expectation: nil, waiter: nil, completedFileIsIntact: false) == [
                .warn("d", .afterShutdown)
            ])
        let ended = machine.transferEnded("a", generation: 1, .cancelled)
        #expect(ended == [.publish("a", .suspended), .shutDownCompleted])
        #expect(machine.shutdown().isEmpty)
    }

    @Test("Stale generations are ignored")
    func staleGeneration() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        _ = machine.request("a", expectation: nil, waiter: 1, completedFileIsIntact: false)
        #expect(machine.transferEnded("a", generation: 7, .completed(nil)).isEmpty)
        #expect(machine.transferEnded("zzz", generation: 1, .completed(nil)).isEmpty)
    }

    @Test("Restored downloads that were waiting or running come back suspended")
    func restore() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        machine.restore("q", state: .queued, checksum: nil)
        machine.restore("d", state: .downloading, checksum: nil)
        machine.restore("i", state: .idle, checksum: nil)
        #expect(
            [machine.state(of: "q"), machine.state(of: "d"), machine.state(of: "i")] == [.suspended, .suspended, .idle])
    }
}
