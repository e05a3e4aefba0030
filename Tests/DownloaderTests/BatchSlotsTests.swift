import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

@Suite("BatchSlots")
struct BatchSlotsTests {
    @Test("A waiting driver is woken once an eighth of the slots (at most 64) are free, not at each one")
    func wakesOncePerSeveral() {
        var slots = BatchSlots(limit: 1_000)
        #expect(slots.wakeAt == 64)
        for _ in 0..<1_000 { #expect(slots.take(waits: true) == .taken) }
        #expect(slots.take(waits: true) == .mustWait)
        var wakes: [Int] = []
        for given in 1...200 where slots.give() { wakes.append(given) }
        // Woken at the 64th slot back (holding it); then it does not ask again here, so no more wakes.
        #expect(wakes == [64])
        #expect(slots.available == 200 - 1)
    }

    @Test("Small limits wake the driver at each slot, as before")
    func smallLimits() {
        for limit in 1...15 {
            var slots = BatchSlots(limit: limit)
            #expect(slots.wakeAt == 1, "limit \(limit)")
            for _ in 0..<limit { _ = slots.take(waits: true) }
            #expect(slots.take(waits: true) == .mustWait)
            let woken = slots.give()
            #expect(woken, "limit \(limit)")
        }
        #expect(BatchSlots(limit: 0).limit == 1)
    }

    @Test("A look without waiting does not make the driver wait; closing ends a driver's wait")
    func lookAndClose() {
        var slots = BatchSlots(limit: 1)
        #expect(slots.take(waits: false) == .taken)
        #expect(slots.take(waits: false) == .mustWait)
        let wokenWithoutWaiter = slots.give()
        #expect(!wokenWithoutWaiter && !slots.driverWaits)
        _ = slots.take(waits: true)
        _ = slots.take(waits: true)
        #expect(slots.driverWaits)
        slots.close()
        #expect(!slots.driverWaits && slots.isClosed)
        #expect(slots.take(waits: true) == .closed)
    }

    /// Seeded sequences of takes, gives and (rarely) a close, against a count of the slots held: a driver is never
    /// left waiting while enough slots are free, no more are out than the limit, and every slot comes back.
    /// `DOWNLOADER_BATCH_SLOTS_SEEDS` runs more (the default 300 in CI).
    @Test("Seeded take/give/close sequences: never over the limit, never a driver left waiting with slots free")
    func seededSequences() {
        let count = UInt64(ProcessInfo.processInfo.environment["DOWNLOADER_BATCH_SLOTS_SEEDS"] ?? "") ?? 300
        for seed in 1...max(1, count) {
            var random = SeededGenerator(seed: seed)
            let limit = [1, 2, 7, 8, 16, 100, 1_000][Int.random(in: 0..<7, using: &random)]
            var slots = BatchSlots(limit: limit)
            var held = 0  // read and not yet given back
            var waiting = false
            var wakes = 0
            var gives = 0
            for _ in 0..<Int.random(in: 1...3_000, using: &random) {
                let roll = Int.random(in: 0..<1_000, using: &random)
                if roll == 0 {
                    slots.close()
                    waiting = false  // woken, and told the batch is closed
                } else if !waiting && roll % 3 != 0 {
                    switch slots.take(waits: true) {
                    case .taken: held += 1
                    case .mustWait: waiting = true
                    case .closed: #expect(slots.isClosed, "seed \(seed)")
                    }
                } else if held > 0 {
                    held -= 1
                    gives += 1
                    if slots.give() {
                        #expect(waiting && !slots.isClosed, "seed \(seed)")
                        waiting = false
                        held += 1
                        wakes += 1
                    }
                }
                #expect(held + slots.available == limit, "seed \(seed)")
                #expect(held <= limit && slots.available >= 0, "seed \(seed)")
                #expect(slots.driverWaits == waiting, "seed \(seed)")
                if waiting { #expect(slots.available < slots.wakeAt, "seed \(seed): a driver waits with slots free") }
            }
            #expect(wakes <= gives / slots.wakeAt + 1, "seed \(seed)")
            // Every slot back: a waiting driver has been woken by then.
            while held > 0 {
                held -= 1
                if slots.give() { held += 1 }  // the woken driver holds one, and gives it back next
            }
            #expect(!slots.driverWaits, "seed \(seed): a driver waits with every slot free")
        }
    }
}
