import HTTPTestServer
import Testing

@testable import Downloader

/// The window-length rule without sockets: rule by rule, then random event sequences against its invariants.
@Suite("WindowSizing")
struct WindowSizingTests {
    @Test("A full window the disk kept up with (a quarter of a base window waiting at most) makes the next 4× as long")
    func growsWhileTheDiskKeepsUp() {
        var sizing = WindowSizing(base: 100, maximum: 1_000)
        #expect(sizing.full == 100)
        sizing.windowEnded(length: 100, peakUnwritten: 25)
        #expect(sizing.full == 400)
        sizing.windowEnded(length: 400, peakUnwritten: 0)
        #expect(sizing.full == 1_000, "never past the maximum")
        sizing.windowEnded(length: 1_000, peakUnwritten: 0)
        #expect(sizing.full == 1_000)
    }

    @Test("A memory budget's share bounds every window and buffer of a transfer (issue #48)")
    func memoryShare() {
        let defaults = Transfer.Configuration()
        for share: Int64 in [1 << 20, 3 << 20, 64 << 20, 1 << 30] {
            let fitted = defaults.fitting(memory: share)
            let bound = max(1 << 20, share)
            // About 1.5 windows wait for the disk at most: within the share, and never more than without a budget.
            #expect(fitted.maximumWindowSize * 3 / 2 <= bound && fitted.windowSize <= fitted.maximumWindowSize)
            #expect(fitted.maximumWindowSize <= defaults.maximumWindowSize && fitted.windowSize <= defaults.windowSize)
            #expect(fitted.maximumUnwrittenBytes <= bound / 2 && fitted.hashBacklogLimit <= bound / 8)
            #expect(fitted.firstWindowSize <= fitted.windowSize)
        }
        #expect(defaults.fitting(memory: 1).windowSize >= 256 << 10, "at least 1 MiB a transfer")
    }

    @Test("A window the disk fell behind on, a short one, or a cut one does not grow the next")
    func staysWhenItShould() {
        var sizing = WindowSizing(base: 100, maximum: 10_000)
        sizing.windowEnded(length: 100, peakUnwritten: 26)
        #expect(sizing.full == 100, "more than a quarter of a base window waited")
        sizing.windowEnded(length: 100, peakUnwritten: 0, hashFellBehind: true)
        #expect(sizing.full == 100, "the hasher had to read back: hashing is the slower side")
        sizing.windowEnded(length: 40, peakUnwritten: 0)
        #expect(sizing.full == 100, "a short window (the first request, the file's tail, a bandwidth limit)")
        sizing.windowEnded(length: 100, peakUnwritten: 0)
        sizing.windowEnded(length: 400, peakUnwritten: 26)
        #expect(sizing.full == 400, "the bar is a quarter of the base window, not of the grown one")
        sizing.windowEnded(length: 400, peakUnwritten: 0)
        #expect(sizing.full == 1_600)
        sizing.diskFellBehind()
        #expect(sizing.full == 100, "back to the base when a grown window is cut")
    }

    @Test("Only a grown window has a limit of its own: one and a half base windows, the bound of base windows")
    func limits() {
        let sizing = WindowSizing(base: 100, maximum: 1_000)
        #expect(sizing.unwrittenLimit(forWindowOf: 100) == nil)
        #expect(sizing.unwrittenLimit(forWindowOf: 64) == nil)
        #expect(sizing.unwrittenLimit(forWindowOf: 101) == 150)
        #expect(WindowSizing(base: 100, maximum: 10).full == 100, "a maximum below the base is the base")
    }

    @Test("Random sequences: the window stays between base and maximum, and memory within 1.5 base windows")
    func randomSequences() {
        for seed in 0..<UInt64(200) {
            var random = SeededGenerator(seed: 12_000 + seed)
            let base = Int64.random(in: 1...1_000, using: &random)
            let maximum = Int64.random(in: 1...20_000, using: &random)
            var sizing = WindowSizing(base: base, maximum: maximum)
            for _ in 0..<200 {
                // A window: either the full one or shorter; the disk keeps up or not; a grown one may be cut.
                let length =
                    Bool.random(using: &random) ? sizing.full : Int64.random(in: 1...sizing.full, using: &random)
                let unwritten = Int64.random(in: 0...length, using: &random)
                if let limit = sizing.unwrittenLimit(forWindowOf: length), unwritten > limit {
                    sizing.diskFellBehind()
                } else {
                    sizing.windowEnded(length: length, peakUnwritten: unwritten)
                }
                #expect(sizing.full >= sizing.base && sizing.full <= max(base, maximum), "seed \(seed)")
                // What a window can hold in memory: its own length when it has no limit, else the limit.
                let held = sizing.unwrittenLimit(forWindowOf: sizing.full) ?? sizing.full
                #expect(held <= max(sizing.base, sizing.base * 3 / 2), "seed \(seed)")
            }
        }
    }
}
