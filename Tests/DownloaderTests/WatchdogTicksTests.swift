import Testing

@testable import Downloader

/// The watchdog's ticks: which time between them nobody watched (`WatchdogTicks`).
@Suite("WatchdogTicks")
struct WatchdogTicksTests {
    static let second: UInt64 = 1_000_000_000

    @Test("Ticks on time, or late within the tolerance, leave no time unwatched")
    func onTime() {
        var ticks = WatchdogTicks(interval: Self.second / 4, start: 10 * Self.second - Self.second / 4)
        #expect(ticks.tick(now: 10 * Self.second) == 0)
        for quarter in 1...40 { #expect(ticks.tick(now: 10 * Self.second + UInt64(quarter) * Self.second / 4) == 0) }
        // 1.2 s: the interval and 0.95 s of lateness, within the second tolerated.
        #expect(ticks.tick(now: 20 * Self.second + Self.second * 12 / 10) == 0)
    }

    @Test("A tick long overdue leaves all its gap but one interval unwatched, once")
    func overdue() {
        var ticks = WatchdogTicks(interval: Self.second / 4, start: 10 * Self.second)
        #expect(ticks.tick(now: 18 * Self.second) == 8 * Self.second - Self.second / 4)
        #expect(ticks.tick(now: 18 * Self.second + Self.second / 4) == 0)
        // Just beyond the tolerance.
        #expect(ticks.tick(now: 19 * Self.second + Self.second / 4 + Self.second / 4 + 1) == Self.second + 1)
    }

    @Test("A first tick long after the watch began (stopped before its first second) leaves that time unwatched")
    func lateFirstTick() {
        var ticks = WatchdogTicks(interval: Self.second, start: 5 * Self.second)
        #expect(ticks.tick(now: 13 * Self.second) == 7 * Self.second)
    }

    @Test("A clock that goes back is no gap, and the last tick stays the latest")
    func backwards() {
        var ticks = WatchdogTicks(interval: Self.second, tolerance: 0, start: 100 * Self.second)
        #expect(ticks.tick(now: 50 * Self.second) == 0)
        #expect(ticks.last == 100 * Self.second)
        #expect(ticks.tick(now: 103 * Self.second) == 2 * Self.second)
    }
}
