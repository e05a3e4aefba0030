import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// `Transfer.StateMachine.WindowEndRule`: when a window's request stops asking, as a value (issue #33).
@Suite("Transfer window end rule")
struct TransferWindowEndTests {
    typealias Rule = Transfer.StateMachine.WindowEndRule
    static let mib: Int64 = 1 << 20

    static let wholeUnresumable = Rule.Response(isWholeStream: true, resumable: false)
    static let wholeResumable = Rule.Response(isWholeStream: true, resumable: true, expectedBodyLength: 500 * mib)

    @Test("A whole body that can be resumed ends as soon as the disk is more than the soft limit behind")
    func resumableEndsAtOnce() {
        var rule = Rule(softUnwritten: 32 * Self.mib)
        #expect(
            rule.chunkArrived(received: 1, unwritten: 32 * Self.mib, response: Self.wholeResumable) { 0 } == .proceed)
        #expect(
            rule.chunkArrived(received: 2, unwritten: 32 * Self.mib + 1, response: Self.wholeResumable) { 0 }
                == .diskBehind)
    }

    @Test("A whole body that cannot be resumed waits up to the grace period, under the hard limit, then fails")
    func unresumableGetsAGracePeriod() {
        var rule = Rule(softUnwritten: 32 * Self.mib, hardUnwritten: 48 * Self.mib, behindGrace: 1_000)
        var clock: UInt64 = 10_000
        let over = 40 * Self.mib
        #expect(rule.chunkArrived(received: 1, unwritten: over, response: Self.wholeUnresumable) { clock } == .proceed)
        clock += 999
        #expect(rule.chunkArrived(received: 2, unwritten: over, response: Self.wholeUnresumable) { clock } == .proceed)
        // The disk caught up: the grace starts again next time.
        #expect(
            rule.chunkArrived(received: 3, unwritten: Self.mib, response: Self.wholeUnresumable) { clock } == .proceed)
        clock += 900
        #expect(rule.chunkArrived(received: 4, unwritten: over, response: Self.wholeUnresumable) { clock } == .proceed)
        clock += 1_001
        #expect(
            rule.chunkArrived(received: 5, unwritten: over, response: Self.wholeUnresumable) { clock } == .cannotWait)
        var hard = Rule(softUnwritten: 32 * Self.mib, hardUnwritten: 48 * Self.mib, behindGrace: 1_000)
        #expect(
            hard.chunkArrived(received: 1, unwritten: 48 * Self.mib + 1, response: Self.wholeUnresumable) { 0 }
                == .cannotWait)
    }

    @Test("The clock is read only while a decision needs it")
    func clockOnlyWhenNeeded() {
        var rule = Rule(softUnwritten: 32 * Self.mib, grownLimit: 6 * Self.mib)
        let window = Rule.Response(isWholeStream: false, resumable: true, expectedBodyLength: 64 * Self.mib)
        var reads = 0
        for chunk in 1...100 {
            _ = rule.chunkArrived(received: Int64(chunk) << 14, unwritten: Self.mib, response: window) {
                reads += 1
                return 0
            }
        }
        #expect(reads == 0)
        #expect(rule.chunkArrived(received: 1, unwritten: 7 * Self.mib, response: window) { 0 } == .diskBehind)
    }

    @Test("A slow first request is cut once, a fast one never; a whole body is never cut")
    func firstRequest() {
        let budget = FirstRequestBudget(measuring: 100, remaining: 1_000)
        let window = Rule.Response(isWholeStream: false, resumable: true, expectedBodyLength: 1_000_000)
        var slow = Rule(softUnwritten: 32 * Self.mib, firstRequestBudget: budget)
        #expect(slow.chunkArrived(received: 10, unwritten: 0, response: window) { 1_000 } == .proceed)
        #expect(slow.judgementTime == 1_100)
        #expect(slow.judge(received: 20, response: window, now: 1_100) == .cutShort)
        #expect(slow.chunkArrived(received: 30, unwritten: 0, response: window) { 1_200 } == .proceed, "decided")
        var fast = Rule(softUnwritten: 32 * Self.mib, firstRequestBudget: budget)
        _ = fast.chunkArrived(received: 10, unwritten: 0, response: window) { 1_000 }
        #expect(fast.chunkArrived(received: 999_000, unwritten: 0, response: window) { 1_100 } == .proceed)
        var whole = Rule(softUnwritten: 32 * Self.mib, firstRequestBudget: budget)
        #expect(whole.chunkArrived(received: 10, unwritten: 0, response: Self.wholeUnresumable) { 1_000 } == .proceed)
        #expect(whole.judgementTime == nil)
    }

    @Test("Seeded random chunk sequences: a verdict other than proceed only past a limit, and never cannotWait early")
    func randomSequences() {
        for seed in 0..<200 {
            var random = SeededGenerator(seed: UInt64(seed))
            let soft = Int64.random(in: 1...64, using: &random) * Self.mib
            let hard = soft + Int64.random(in: 0...32, using: &random) * Self.mib
            let grace = UInt64.random(in: 1...1_000, using: &random)
            let response = Rule.Response(
                isWholeStream: true, resumable: Bool.random(using: &random), expectedBodyLength: nil)
            var rule = Rule(softUnwritten: soft, hardUnwritten: hard, behindGrace: grace)
            var clock: UInt64 = 1
            var behindSince: UInt64?
            for step in 0..<300 {
                clock += UInt64.random(in: 0...50, using: &random)
                let unwritten = Int64.random(in: 0...(hard + 8 * Self.mib), using: &random)
                let verdict = rule.chunkArrived(received: Int64(step), unwritten: unwritten, response: response) {
                    clock
                }
                if unwritten <= soft {
                    behindSince = nil
                    #expect(verdict == .proceed, "seed \(seed) step \(step)")
                    continue
                }
                if response.resumable {
                    #expect(verdict == .diskBehind, "seed \(seed) step \(step)")
                    continue
                }
                let since = behindSince ?? clock
                behindSince = since
                let expected: Rule.Verdict = unwritten > hard || clock - since > grace ? .cannotWait : .proceed
                #expect(
                    verdict == expected, "seed \(seed) step \(step): \(unwritten) behind since \(since) at \(clock)")
                if verdict == .cannotWait { break }
            }
        }
    }
}
