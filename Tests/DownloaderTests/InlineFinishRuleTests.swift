import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Where a small fresh file's last steps run (`InlineFinishRule`): inline on the transfer's thread one at a time, for
/// small bodies, on two cores or more, and not for a cooldown after a slow finish; else on a `Blocking` thread.
struct InlineFinishRuleTests {
    private let millisecond: UInt64 = 1_000_000

    @Test("One inline finish at a time: a second hops until the first ends")
    func oneAtATime() {
        var rule = InlineFinishRule(cores: 2)
        #expect(rule.start(bodyCount: 1_024, now: 10) == .inline)
        #expect(rule.isRunningInline)
        #expect(rule.start(bodyCount: 1_024, now: 11) == .hop)
        rule.finished(inline: false, duration: 5, now: 16)  // the hopped one ends first: the slot stays taken
        #expect(rule.start(bodyCount: 1_024, now: 17) == .hop)
        rule.finished(inline: true, duration: 10, now: 20)
        #expect(!rule.isRunningInline)
        #expect(rule.start(bodyCount: 1_024, now: 21) == .inline)
        #expect(rule.inlineCount == 2 && rule.hopCount == 2)
    }

    @Test("One core, or a body above the largest, always hops")
    func coresAndSize() {
        var single = InlineFinishRule(cores: 1)
        #expect(single.start(bodyCount: 1, now: 0) == .hop)
        #expect(!single.isRunningInline)
        var rule = InlineFinishRule(cores: 4)
        #expect(rule.start(bodyCount: rule.largestBody + 1, now: 0) == .hop)
        #expect(!rule.isRunningInline)
        #expect(rule.start(bodyCount: rule.largestBody, now: 0) == .inline)
        #expect(InlineFinishRule(cores: 2).largestBody == 64 << 10)
    }

    @Test("A slow finish, inline or hopped, sends every finish to a Blocking thread for the cooldown")
    func slowFinishCoolsDown() {
        var rule = InlineFinishRule(cores: 2, slowFinish: 2 * millisecond, cooldown: 1_000 * millisecond)
        #expect(rule.start(bodyCount: 10, now: 0) == .inline)
        rule.finished(inline: true, duration: 2 * millisecond, now: 2 * millisecond)  // at the bound: not slow
        #expect(rule.start(bodyCount: 10, now: 3 * millisecond) == .inline)
        rule.finished(inline: true, duration: 3 * millisecond, now: 6 * millisecond)  // slow
        #expect(rule.hopsUntil == 1_006 * millisecond)
        #expect(rule.start(bodyCount: 10, now: 7 * millisecond) == .hop)
        #expect(rule.start(bodyCount: 10, now: 1_005 * millisecond) == .hop)
        // A slow hopped finish during the cooldown extends it; a fast one does not shorten it.
        rule.finished(inline: false, duration: 900 * millisecond, now: 1_005 * millisecond)
        rule.finished(inline: false, duration: 1, now: 1_005 * millisecond)
        #expect(rule.start(bodyCount: 10, now: 1_006 * millisecond) == .hop)
        #expect(rule.start(bodyCount: 10, now: 2_005 * millisecond) == .inline)
    }

    /// Seeded sequences of starts, ends and clock steps against a small model: never two inline finishes at once, none
    /// on one core, for a large body or within the cooldown of a slow finish; and a finish that may run inline does.
    /// `DOWNLOADER_INLINE_FINISH_SEEDS` runs more (the default 300 in CI).
    @Test("Seeded start/end/clock sequences against a model: the bounds always hold, and inline whenever allowed")
    func seededSequences() {
        let count = UInt64(ProcessInfo.processInfo.environment["DOWNLOADER_INLINE_FINISH_SEEDS"] ?? "") ?? 300
        for seed in 1...max(1, count) {
            var random = SeededGenerator(seed: 9_100 + seed)
            let cores = [1, 2, 2, 4, 16][Int.random(in: 0..<5, using: &random)]
            var rule = InlineFinishRule(
                cores: cores, largestBody: 64 << 10, slowFinish: 2 * millisecond, cooldown: 100 * millisecond)
            var now: UInt64 = UInt64.random(in: 0...1_000_000, using: &random)
            var running: [(inline: Bool, started: UInt64)] = []
            var lastSlowEnd: UInt64?  // the model: when the latest slow finish ended
            for step in 0..<Int.random(in: 1...500, using: &random) {
                let roll = Int.random(in: 0..<10, using: &random)
                if roll < 4 {
                    let body = Bool.random(using: &random) ? Int.random(in: 0...(64 << 10), using: &random) : 1 << 20
                    let allowed =
                        cores >= 2 && body <= 64 << 10 && !running.contains(where: \.inline)
                        && lastSlowEnd.map { now >= $0 + 100 * millisecond } ?? true
                    let decision = rule.start(bodyCount: body, now: now)
                    #expect(decision == (allowed ? .inline : .hop), "seed \(seed), step \(step)")
                    running.append((decision == .inline, now))
                } else if roll < 8, !running.isEmpty {
                    let index = Int.random(in: 0..<running.count, using: &random)
                    let finish = running.remove(at: index)
                    let duration = now - finish.started
                    rule.finished(inline: finish.inline, duration: duration, now: now)
                    if duration > 2 * millisecond { lastSlowEnd = max(lastSlowEnd ?? 0, now) }
                } else {
                    now +=
                        [0, 1, 500_000, 2 * millisecond, 3 * millisecond, 150 * millisecond][
                            Int.random(in: 0..<6, using: &random)]
                }
                #expect(running.filter(\.inline).count <= 1, "seed \(seed), step \(step)")
                #expect(rule.isRunningInline == running.contains(where: \.inline), "seed \(seed), step \(step)")
                if cores < 2 { #expect(rule.inlineCount == 0, "seed \(seed)") }
            }
        }
    }
}
