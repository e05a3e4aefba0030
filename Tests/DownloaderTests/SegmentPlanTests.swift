import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// The segment plan without sockets: windows in order, failures, stopping, and random event sequences.
@Suite("SegmentPlan")
struct SegmentPlanTests {
    @Test("Connections take windows in file order across the gaps; a failed window's rest comes first")
    func inOrder() {
        var plan = SegmentPlan(missing: [10..<250, 300..<320, 400..<400, 500..<620], window: 100)
        #expect(plan.nextWindow(for: 0) == 10..<110)
        #expect(plan.nextWindow(for: 1) == 110..<210)
        #expect(plan.nextWindow(for: 2) == 210..<250, "a window never crosses a gap")
        plan.finished(1)
        #expect(plan.nextWindow(for: 1) == 300..<320)
        plan.finished(0)
        #expect(plan.nextWindow(for: 0) == 500..<600, "an empty range is skipped")
        plan.failed(2, received: 15)
        #expect(plan.nextWindow(for: 2) == 225..<250, "what a failed window did not bring comes first")
        #expect(plan.outstanding == 100 + 20 + 25 + 20)
        for connection in 0..<3 { plan.finished(connection) }
        #expect(plan.nextWindow(for: 0) == 600..<620)
        plan.finished(0)
        #expect(plan.nextWindow(for: 0) == nil && plan.isComplete)
    }

    @Test("After a stop, windows in flight end and no new one starts")
    func stopping() {
        var plan = SegmentPlan(missing: [0..<1000], window: 100)
        #expect(plan.nextWindow(for: 0) == 0..<100)
        plan.stop()
        #expect(plan.nextWindow(for: 1) == nil)
        plan.finished(0)
        #expect(!plan.isComplete && plan.outstanding == 900)
    }

    @Test("A failed window gives back what did not arrive; any connection takes it")
    func failure() {
        var plan = SegmentPlan(missing: [0..<300], window: 100)
        #expect(plan.nextWindow(for: 0) == 0..<100)
        plan.failed(0, received: 40)
        #expect(plan.outstanding == 260)
        #expect(plan.nextWindow(for: 7) == 40..<100)
        plan.finished(7)
        #expect(plan.nextWindow(for: 7) == 100..<200)
    }

    @Test("Random sequences: no byte is asked for while in flight or after it arrived, and every byte arrives once")
    func randomSequences() {
        for seed in 0..<UInt64(300) {
            var random = SeededGenerator(seed: 9_000 + seed)
            let size = Int.random(in: 1...5_000, using: &random)
            let first = Int.random(in: 0...min(size, 200), using: &random)
            // Bytes already on disk: a prefix and a few random ranges.
            var arrived = [Int](repeating: 0, count: size)
            for index in 0..<first { arrived[index] = 1 }
            for _ in 0..<Int.random(in: 0...3, using: &random) {
                let start = Int.random(in: 0..<size, using: &random)
                let end = min(size, start + Int.random(in: 1...300, using: &random))
                for index in start..<end { arrived[index] = 1 }
            }
            var missing: [Range<Int64>] = []
            var index = 0
            while index < size {
                guard arrived[index] == 0 else {
                    index += 1
                    continue
                }
                let start = index
                while index < size && arrived[index] == 0 { index += 1 }
                missing.append(Int64(start)..<Int64(index))
            }
            let connections = Int.random(in: 1...6, using: &random)
            let window = Int64.random(in: 1...400, using: &random)
            var plan = SegmentPlan(missing: missing, window: window)
            var inFlight: [Int: Range<Int64>] = [:]
            var steps = 0
            while !plan.isComplete && steps < 100_000 {
                steps += 1
                let connection = Int.random(in: 0..<connections, using: &random)
                if let window = inFlight[connection] {
                    if Int.random(in: 0..<10, using: &random) == 0 {
                        let received = Int64.random(in: 0...Int64(window.count), using: &random)
                        for byte in window.lowerBound..<(window.lowerBound + received) { arrived[Int(byte)] += 1 }
                        plan.failed(connection, received: received)
                    } else {
                        for byte in window { arrived[Int(byte)] += 1 }
                        plan.finished(connection)
                    }
                    inFlight[connection] = nil
                } else if let window = plan.nextWindow(for: connection) {
                    #expect(!window.isEmpty && window.count <= plan.window)
                    #expect(window.allSatisfy { arrived[Int($0)] == 0 }, "seed \(seed): asked again for arrived bytes")
                    #expect(
                        inFlight.values.allSatisfy { !$0.overlaps(window) }, "seed \(seed): asked twice in flight")
                    inFlight[connection] = window
                }
                #expect(plan.inFlight == inFlight)
            }
            #expect(plan.isComplete, "seed \(seed)")
            #expect(arrived.allSatisfy { $0 == 1 }, "seed \(seed): every byte arrives exactly once")
        }
    }
}
