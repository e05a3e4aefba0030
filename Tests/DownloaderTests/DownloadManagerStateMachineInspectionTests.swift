import Foundation
import Testing

@testable import Downloader

/// A request for a completed download waits while the owner looks at the file (`.inspectCompletedFile`), and what
/// comes for that download meanwhile is held and follows it in order: the file work is off the actor, the order is
/// the callers'.
@Suite("DownloadManager.StateMachine inspection of completed files")
struct DownloadManagerStateMachineInspectionTests {
    typealias Machine = DownloadManager.StateMachine<String>

    static let md5A = Checksum(md5: String(repeating: "a", count: 32))!
    static let md5B = Checksum(md5: String(repeating: "b", count: 32))!

    /// A machine whose download "a" is completed with `md5A`.
    func completed() -> Machine {
        var machine = Machine(limit: 2, prioritization: .fifo)
        machine.restore("a", state: .completed, checksum: Self.md5A)
        return machine
    }

    @Test("A request for a completed download is held until its file is looked at, then answered")
    func heldUntilInspected() {
        var machine = completed()
        #expect(
            machine.request("a", id: 10, expectation: nil, waiter: 1) == [
                .hold("a", 10), .inspectCompletedFile("a", 10),
            ])
        #expect(!machine.isSettled("a"), "a download being looked at must not be forgotten")
        #expect(machine.completedFileInspected("a", request: 99, intact: true).isEmpty, "another request's report")
        #expect(
            machine.completedFileInspected("a", request: 10, intact: true) == [.succeed([1], "a"), .releaseRequest(10)])
        #expect(machine.isSettled("a"))
        // Reported twice: nothing.
        #expect(machine.completedFileInspected("a", request: 10, intact: true).isEmpty)
    }

    @Test("A file found gone starts a new attempt with the held request's options")
    func goneStartsAgain() {
        var machine = completed()
        _ = machine.request("a", id: 10, expectation: nil, waiter: 1)
        let actions = machine.completedFileInspected("a", request: 10, intact: false)
        #expect(actions.contains(.releaseCompletedFile("a")))
        #expect(actions.contains(.adoptOptions("a", fresh: false, request: 10)), "the held request's options")
        #expect(actions.contains { if case .start("a", _, _) = $0 { true } else { false } })
        #expect(actions.last == .releaseRequest(10))
        #expect(machine.state(of: "a") == .downloading)
    }

    @Test("Requests, suspend, resume and remove that come meanwhile follow in the callers' order")
    func heldEventsInOrder() {
        var machine = completed()
        _ = machine.request("a", id: 10, expectation: nil, waiter: 1)
        #expect(machine.request("a", id: 11, expectation: nil, waiter: 2) == [.hold("a", 11)])
        #expect(machine.suspend("a").isEmpty)
        #expect(machine.resume("a").isEmpty)
        #expect(machine.remove("a").isEmpty, "a removal waits for the file to be looked at")
        #expect(machine.state(of: "a") == .completed)
        // After the removal, a request is a new download.
        #expect(machine.request("a", id: 12, expectation: nil, waiter: 3) == [.hold("a", 12)])
        let actions = machine.completedFileInspected("a", request: 10, intact: true)
        // Waiter 1 and 2 succeed in their order, then the removal, then a new download for waiter 3.
        let succeedFirst = actions.firstIndex(of: .succeed([1], "a"))
        let inspectSecond = actions.firstIndex(of: .inspectCompletedFile("a", 11))
        #expect(succeedFirst != nil)
        #expect(inspectSecond != nil, "the second request looks at the file again: it may have gone meanwhile")
        #expect(!actions.contains(.forget("a")), "the removal waits behind the second inspection")
        let rest = machine.completedFileInspected("a", request: 11, intact: true)
        let forget = rest.firstIndex(of: .forget("a"))
        let fresh = rest.firstIndex(of: .adoptOptions("a", fresh: true, request: 12))
        #expect(rest.first == .succeed([2], "a"))
        #expect(forget != nil && fresh != nil && forget! < fresh!, "\(rest)")
        #expect(rest.contains(.discardFiles("a", producedBy: nil)))
        #expect(rest.last == .releaseRequest(12))
        #expect(machine.state(of: "a") == .downloading)
    }

    @Test("A waiter that gives up while its request is held is answered once, and the request goes on")
    func heldWaiterCancelled() {
        var machine = completed()
        _ = machine.request("a", id: 10, expectation: nil, waiter: 1)
        _ = machine.request("a", id: 11, expectation: nil, waiter: 2)
        #expect(machine.cancelWaiter(1, of: "a") == [.fail([1], "a", .waiterCancelled)])
        #expect(machine.cancelWaiter(2, of: "a") == [.fail([2], "a", .waiterCancelled)])
        #expect(machine.cancelWaiter(2, of: "a").isEmpty)
        let actions = machine.completedFileInspected("a", request: 10, intact: true)
        #expect(!actions.contains { if case .succeed = $0 { true } else { false } }, "\(actions)")
        #expect(machine.completedFileInspected("a", request: 11, intact: true) == [.releaseRequest(11)])
    }

    @Test("The shutdown waits for the file being looked at; held requests are then refused as after it")
    func shutdownWaitsForInspection() {
        var machine = completed()
        _ = machine.request("a", id: 10, expectation: nil, waiter: 1)
        _ = machine.request("a", id: 11, expectation: nil, waiter: 2)
        #expect(!machine.shutdown().contains(.shutDownCompleted))
        #expect(!machine.hasShutDown)
        let actions = machine.completedFileInspected("a", request: 10, intact: true)
        #expect(actions.contains(.fail([1], "a", .afterShutdown)))
        #expect(actions.contains(.fail([2], "a", .afterShutdown)))
        #expect(actions.last == .shutDownCompleted)
        #expect(machine.hasShutDown)
    }

    @Test("A refused request does not wait for the file")
    func refusedNotHeld() {
        var machine = completed()
        _ = machine.shutdown()
        #expect(
            machine.request("a", id: 10, expectation: nil, waiter: 1) == [
                .warn("a", .afterShutdown), .fail([1], "a", .afterShutdown),
            ])
    }

    @Test("A file that could not be put where the request asked fails that request, or warns; it stays completed")
    func unplaced() {
        var machine = completed()
        let error = DownloadError.fileSystem(nil, reason: "the destination /x is a folder")
        _ = machine.request("a", id: 10, expectation: nil, waiter: 1)
        #expect(
            machine.completedFileInspected("a", request: 10, intact: true, unplaced: error) == [
                .fail([1], "a", .unplaced(error)), .releaseRequest(10),
            ])
        _ = machine.request("a", id: 11, expectation: nil, waiter: nil)
        #expect(
            machine.completedFileInspected("a", request: 11, intact: true, unplaced: error) == [
                .warn("a", .unplaced(error)), .releaseRequest(11),
            ])
        #expect(machine.state(of: "a") == .completed && machine.isSettled("a"))
    }

    @Test("A request's expectation the file does not have is verified after the look")
    func expectationAfterInspection() {
        var machine = completed()
        _ = machine.request("a", id: 10, expectation: Self.md5B, waiter: 1)
        let actions = machine.completedFileInspected("a", request: 10, intact: true)
        #expect(actions.contains(.publish("a", .queued)) || actions.contains(.publish("a", .downloading)))
        #expect(
            actions.contains { if case .start(_, _, let start) = $0 { start.replacesCompletedFile } else { false } })
    }
}

extension DownloadManager.StateMachine {
    /// A request whose completed file, if it has one, the owner looks at at once and finds `completedFileIsIntact`:
    /// the actions of both steps as one list, without those of holding and looking (for the tests of what a request
    /// does once the file is known).
    mutating func request(
        _ key: Key, expectation: Checksum?, priority: Int = 0, waiter: WaiterID?, completedFileIsIntact: Bool,
        contradiction: String? = nil
    ) -> [Action] {
        let id = -1 - (waiter ?? 0)
        var actions = request(
            key, id: id, expectation: expectation, priority: priority, waiter: waiter, contradiction: contradiction)
        if actions.contains(.inspectCompletedFile(key, id)) {
            actions += completedFileInspected(key, request: id, intact: completedFileIsIntact)
        }
        return actions.compactMap { action in
            switch action {
            case .hold, .inspectCompletedFile, .releaseRequest: return nil
            case .adoptOptions(let key, let fresh, _): return .adoptOptions(key, fresh: fresh)
            default: return action
            }
        }
    }
}
