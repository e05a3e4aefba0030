import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

@Suite("WriteBehind")
struct WriteBehindTests {
    @Test("Off, nothing is handed over; on, each chunk is, and each after the first waits for the one before")
    func chunks() {
        var behind = WriteBehind(chunk: 100)
        #expect(behind.wrote(1_000) == .none, "off: a body that cannot be paced")
        behind.isOn = true
        #expect(behind.wrote(60) == .none)
        #expect(behind.wrote(40) == .start)
        #expect(behind.wrote(99) == .none)
        #expect(behind.wrote(1) == .waitThenStart)
        #expect(behind.wrote(250) == .waitThenStart, "a batch of several chunks is handed over at once")
        #expect(behind.wrote(0) == .none)
    }

    @Test("An emptied file starts again: its first chunk waits for nothing")
    func emptied() {
        var behind = WriteBehind(chunk: 100)
        behind.isOn = true
        #expect(behind.wrote(100) == .start)
        #expect(behind.wrote(50) == .none)
        behind.fileEmptied()
        #expect(behind.unstarted == 0 && !behind.isStarted)
        #expect(behind.wrote(99) == .none)
        #expect(behind.wrote(1) == .start)
    }

    /// Seeds for the random sequences (`DOWNLOADER_WRITE_BEHIND_SEEDS` runs more by hand).
    static let seeds = ProcessInfo.processInfo.environment["DOWNLOADER_WRITE_BEHIND_SEEDS"].flatMap(Int.init) ?? 300

    @Test("Random writes, switches and emptied files: never a chunk left unhanded, never a wait for nothing")
    func randomSequences() {
        for seed in 0..<UInt64(Self.seeds) {
            var random = SeededGenerator(seed: 9_100 + seed)
            let chunk = Int64.random(in: 1...5_000, using: &random)
            var behind = WriteBehind(chunk: chunk)
            // The model: bytes written while on and not handed over; whether a hand-over is outstanding.
            var pending: Int64 = 0
            var outstanding = false
            for step in 0..<200 {
                let context = "seed \(seed) step \(step)"
                switch Int.random(in: 0..<10, using: &random) {
                case 0:
                    behind.isOn.toggle()
                case 1:
                    behind.fileEmptied()
                    (pending, outstanding) = (0, false)
                default:
                    let count = Int64.random(in: 0...(3 * chunk), using: &random)
                    let action = behind.wrote(count)
                    guard behind.isOn else {
                        #expect(action == .none, "\(context): off")
                        continue
                    }
                    pending += count
                    if pending >= chunk {
                        #expect(action == (outstanding ? .waitThenStart : .start), "\(context)")
                        (pending, outstanding) = (0, true)
                    } else {
                        #expect(action == .none, "\(context)")
                    }
                }
                #expect(behind.unstarted == pending && behind.unstarted < chunk, "\(context)")
                #expect(behind.isStarted == outstanding, "\(context)")
            }
        }
        print("WriteBehind: \(Self.seeds) seeds (DOWNLOADER_WRITE_BEHIND_SEEDS)")
    }
}
