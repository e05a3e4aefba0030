import Foundation
import Testing

@testable import Downloader

/// A batch's waiters (`download(_:maximumInFlight:)`): a download one of them is told completed is forgotten once
/// settled, its file kept; the machine decides it, the owner only says which actions it carries out.
@Suite("DownloadManager.StateMachine batches' forgetting")
struct DownloadManagerStateMachineBatchTests {
    typealias Machine = DownloadManager.StateMachine<String>

    static let md5A = Checksum(md5: String(repeating: "a", count: 32))!

    /// What the owner does with an event's actions: tells the machine it carries them out.
    @discardableResult
    func carry(_ actions: [Machine.Action], in machine: inout Machine) -> [Machine.Action] {
        machine.carryingOut(actions)
        return actions
    }

    @Test("A download a batch's waiter was told completed is forgotten once settled, its file kept")
    func forgottenAfterSuccess() {
        var machine = Machine(limit: 2, prioritization: .fifo)
        carry(machine.request("a", id: 1, expectation: nil, waiter: 1, forgetsWhenAnswered: true), in: &machine)
        #expect(machine.forgetAnsweredDownloads().isEmpty, "nothing completed yet")
        let file = DownloadManager.CompletedFile(url: URL(fileURLWithPath: "/tmp/a.bin"), length: 3)
        let ended = carry(
            machine.transferEnded("a", generation: 1, .completed(Self.md5A), produced: file), in: &machine)
        #expect(ended.contains(.succeed([1], "a")))
        let forgets = machine.forgetAnsweredDownloads()
        #expect(forgets.first == .releaseCompletedFile("a", file: file.url), "the file is released, never deleted")
        #expect(forgets.contains(.forget("a", keepsPlacedFile: true)))
        #expect(!forgets.contains { if case .discardFiles(_, _, .some) = $0 { true } else { false } })
        #expect(machine.state(of: "a") == nil)
        #expect(machine.forgetAnsweredDownloads().isEmpty, "once")
    }

    @Test("Other waiters' downloads stay; a batch's waiter that failed or gave up forgets nothing")
    func onlyBatchSuccesses() {
        var machine = Machine(limit: 2, prioritization: .fifo)
        carry(machine.request("plain", id: 1, expectation: nil, waiter: 1), in: &machine)
        carry(machine.request("b", id: 2, expectation: nil, waiter: 2, forgetsWhenAnswered: true), in: &machine)
        carry(machine.request("b", id: 3, expectation: nil, waiter: 3), in: &machine)
        // The batch's waiter gives up; the download goes on for waiter 3 and completes.
        carry(machine.cancelWaiter(2, of: "b"), in: &machine)
        carry(machine.transferEnded("plain", generation: 1, .completed(nil)), in: &machine)
        carry(machine.transferEnded("b", generation: 2, .completed(nil)), in: &machine)
        #expect(machine.forgetAnsweredDownloads().isEmpty)
        #expect(machine.state(of: "plain") == .completed && machine.state(of: "b") == .completed)
    }

    @Test("A download asked again before the owner asks is not forgotten")
    func askedAgain() {
        var machine = Machine(limit: 2, prioritization: .fifo)
        carry(machine.request("a", id: 1, expectation: nil, waiter: 1, forgetsWhenAnswered: true), in: &machine)
        carry(machine.transferEnded("a", generation: 1, .completed(nil)), in: &machine)
        // Another request comes within the same round of actions: its file is being looked at.
        #expect(
            carry(machine.request("a", id: 2, expectation: nil, waiter: 2), in: &machine) == [
                .hold("a", 2), .inspectCompletedFile("a", 2),
            ])
        #expect(machine.forgetAnsweredDownloads().isEmpty)
        #expect(machine.state(of: "a") == .completed)
    }

    @Test("A batch's waiters answered by a shutdown forget nothing, also later")
    func shutdownForgetsNothing() {
        var machine = Machine(limit: 1, prioritization: .fifo)
        carry(machine.request("a", id: 1, expectation: nil, waiter: 1, forgetsWhenAnswered: true), in: &machine)
        carry(machine.request("b", id: 2, expectation: nil, waiter: 2, forgetsWhenAnswered: true), in: &machine)
        let stopping = carry(machine.shutdown(), in: &machine)
        #expect(stopping.contains { if case .fail(let ids, _, _) = $0 { ids.contains(2) } else { false } })
        carry(machine.transferEnded("a", generation: 1, .cancelled), in: &machine)
        #expect(machine.forgetAnsweredDownloads().isEmpty)
    }
}
