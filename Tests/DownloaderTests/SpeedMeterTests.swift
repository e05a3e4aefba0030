import Testing

@testable import Downloader

/// The speed shown for a download is its average over real time, idle ticks included.
@Suite("SpeedMeter")
struct SpeedMeterTests {
    static let tick: UInt64 = 100_000_000

    @Test("A server that sends 200 KiB bursts once a second shows about 200 KiB/s, not the burst's speed")
    func bursts() {
        var meter = SpeedMeter()
        var bytes: Int64 = 0
        for step in 1...300 {
            if step % 10 == 1 { bytes += 204_800 }
            let speed = meter.sample(bytes: bytes, now: UInt64(step) * Self.tick)
            if step >= 60 {
                let ratio = (speed ?? 0) / 204_800
                #expect(ratio > 0.75 && ratio < 1.25, "step \(step): \(speed ?? -1)")
            }
        }
    }

    @Test("A body that trickles a byte every 5 s shows a trickle")
    func trickle() {
        var meter = SpeedMeter()
        var last: Double?
        for step in 1...600 {
            let bytes = Int64(step / 50)
            last = meter.sample(bytes: bytes, now: UInt64(step) * Self.tick)
        }
        #expect((last ?? 100) <= 1)
    }

    @Test("No speed before half a second; a restart from zero starts over")
    func startAndRestart() {
        var meter = SpeedMeter()
        #expect(meter.sample(bytes: 0, now: 1) == nil)
        #expect(meter.sample(bytes: 1000, now: 1 + 4 * Self.tick) == nil)
        #expect(meter.sample(bytes: 2000, now: 1 + 10 * Self.tick) == 2000)
        #expect(meter.sample(bytes: 10, now: 1 + 11 * Self.tick) == nil, "restarted: no history yet")
    }
}
