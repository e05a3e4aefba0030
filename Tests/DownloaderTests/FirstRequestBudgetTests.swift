import Testing

@testable import Downloader

/// When a run's first request on a new connection is cut short (`FirstRequestBudget`), rule by rule with a made-up
/// clock.
@Suite("FirstRequestBudget")
struct FirstRequestBudgetTests {
    static let ms: UInt64 = 1_000_000

    @Test("Judged once, a quarter of a second after the first body bytes: cut when the rest would take over a second")
    func judgedOnce() {
        var slow = FirstRequestBudget()
        let cut1 = slow.bodyArrived(received: 16_384, left: 2_000_000, now: 1_000 * Self.ms)
        #expect(!cut1)
        #expect(slow.judgementTime == 1_250 * Self.ms, "judged then even if no byte comes")
        // 200 KB/s: not judged before 250 ms have passed, then 1.9 MB left would take 9.5 s.
        let cut2 = slow.bodyArrived(received: 40_000, left: 1_976_384, now: 1_120 * Self.ms)
        #expect(!cut2 && !slow.isDecided)
        let cut3 = slow.bodyArrived(received: 66_384, left: 1_950_000, now: 1_250 * Self.ms)
        #expect(cut3 && slow.isDecided)
        let cut4 = slow.bodyArrived(received: 80_000, left: 1_900_000, now: 2_000 * Self.ms)
        #expect(!cut4, "judged once")

        var fast = FirstRequestBudget()
        _ = fast.bodyArrived(received: 16_384, left: 8_000_000, now: 0)
        // 10 MB/s: 5 MB left take half a second.
        let cut5 = fast.bodyArrived(received: 2_516_384, left: 5_000_000, now: 250 * Self.ms)
        #expect(!cut5 && fast.isDecided)
        let cut6 = fast.bodyArrived(received: 7_516_384, left: 1, now: 10_000 * Self.ms)
        #expect(!cut6, "never cut after the verdict")
    }

    @Test("A body that ends before the verdict is never cut; one whose bytes stop coming is cut at the verdict")
    func edges() {
        var whole = FirstRequestBudget()
        let cut7 = whole.bodyArrived(received: 200_000, left: 0, now: 0)
        #expect(!cut7 && whole.isDecided)

        var stuck = FirstRequestBudget()
        _ = stuck.bodyArrived(received: 16_384, left: 100_000, now: 0)
        // No byte between the first chunk and the verdict: no rate to go on, so the rest is given up on here.
        let cut8 = stuck.bodyArrived(received: 16_384, left: 100_000, now: 300 * Self.ms)
        #expect(cut8)

        var custom = FirstRequestBudget(measuring: 50 * Self.ms, remaining: 100 * Self.ms)
        _ = custom.bodyArrived(received: 1, left: 600_000, now: 0)
        let cut9 = custom.bodyArrived(received: 50_001, left: 550_000, now: 50 * Self.ms)
        #expect(cut9, "1 MB/s: 0.55 s left")
    }
}
