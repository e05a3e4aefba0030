import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// The bridge's per-request phase, without URLSession: the redirect-versus-cancel rule and the first end winning.
@Suite("SessionBridge.RequestState")
struct SessionBridgeRequestStateTests {
    typealias State = SessionBridge.RequestState

    static func end(_ name: String) -> RequestEnd { .restartFromZero(reason: name) }

    static func name(_ end: RequestEnd?) -> String? {
        if case .restartFromZero(let reason) = end { return reason }
        return nil
    }

    @Test("An open request closes at once: cancel now, the first end is kept, a second close changes nothing")
    func closeWhileOpen() {
        var state = State()
        #expect(state.isOpen && state.pendingEnd == nil && state.closedAt == nil)
        let cancelNow = state.close(with: Self.end("first"), now: 5)
        #expect(cancelNow && !state.isOpen && Self.name(state.pendingEnd) == "first" && state.closedAt == 5)
        let cancelAgain = state.close(with: Self.end("second"), now: 9)
        #expect(!cancelAgain && Self.name(state.pendingEnd) == "first" && state.closedAt == 5)
        let due = state.taskProducedEvent()
        let answered = state.redirectWillBeAnswered()
        #expect(!due && !answered)
    }

    @Test("A close while a redirect is being answered waits for the task's next event to cancel")
    func closeDuringRedirect() {
        var state = State()
        let answered = state.redirectWillBeAnswered()
        let cancelNow = state.close(with: Self.end("during redirect"), now: 1)
        #expect(answered && !cancelNow && !state.isOpen, "cancelling now would trap in corelibs")
        let due = state.taskProducedEvent()
        let dueAgain = state.taskProducedEvent()
        #expect(due && !dueAgain, "the deferred cancel is due once the redirect settled, and only once")

        var settled = State()
        let redirected = settled.redirectWillBeAnswered()
        let nothingDue = !settled.taskProducedEvent()
        let cancelAfter = settled.close(with: Self.end("after"), now: 2)
        #expect(redirected && nothingDue && cancelAfter, "after the redirect settled a cancel is safe at once")
    }

    @Test("Seeded random event sequences: no cancel inside a redirect, exactly one cancel per close, first end wins")
    func fuzz() {
        for seed in 0..<200 {
            var random = SeededGenerator(seed: UInt64(seed))
            var state = State()
            var redirectPending = false  // a handler was called and the task produced no event since
            var cancels = 0
            var firstEnd: String?
            for step in 0..<200 {
                switch Int.random(in: 0..<3, using: &random) {
                case 0:
                    let name = "end \(step)"
                    if state.close(with: Self.end(name), now: UInt64(step)) {
                        #expect(!redirectPending, "seed \(seed): cancel inside a redirect")
                        cancels += 1
                    }
                    firstEnd = firstEnd ?? name
                case 1:
                    let wasOpen = state.isOpen
                    if state.redirectWillBeAnswered() {
                        #expect(wasOpen)
                        redirectPending = true
                    } else {
                        #expect(!wasOpen)
                    }
                default:
                    if state.taskProducedEvent() { cancels += 1 }
                    redirectPending = false
                }
                #expect(Self.name(state.pendingEnd) == firstEnd, "seed \(seed): the first end is kept")
                #expect(state.isOpen == (firstEnd == nil))
                // Open: no cancel; closed: one, at the latest by the task's next event.
                if firstEnd == nil { #expect(cancels == 0) }
                #expect(cancels <= 1, "seed \(seed): cancelled twice")
                if firstEnd != nil && !redirectPending { #expect(cancels == 1, "seed \(seed): close without cancel") }
            }
        }
    }
}
