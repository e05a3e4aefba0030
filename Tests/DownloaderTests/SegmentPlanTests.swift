import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// The segment plan without sockets: splitting, windows, stealing, failures, and random event sequences.
@Suite("SegmentPlan")
struct SegmentPlanTests {
    @Test("The missing bytes are split into one segment per connection; a short tail joins the segment before it")
    func split() {
        let plan = SegmentPlan(missing: [16..<1000], connections: 4, window: 100, minimumSegment: 100)
        #expect(plan.segments.map { $0.next..<$0.end } == [16..<262, 262..<508, 508..<754, 754..<1000])
        let few = SegmentPlan(missing: [0..<250], connections: 4, window: 100, minimumSegment: 100)
        #expect(few.segments.map { $0.next..<$0.end } == [0..<100, 100..<250], "no segment under the minimum")
        let gaps = SegmentPlan(missing: [10..<20, 500..<700], connections: 2, window: 50, minimumSegment: 10)
        #expect(gaps.segments.map { $0.next..<$0.end } == [10..<20, 500..<605, 605..<700])
    }

    @Test("Each connection walks its own segment window by window, then steals half of the largest part left")
    func windowsAndSteal() {
        var plan = SegmentPlan(missing: [0..<1000], connections: 2, window: 100, minimumSegment: 100)
        #expect(plan.nextWindow(for: 0) == 0..<100)
        #expect(plan.nextWindow(for: 1) == 500..<600)
        plan.finished(0)
        #expect(plan.nextWindow(for: 0) == 100..<200)
        plan.finished(0)
        for expected: Int64 in [200, 300, 400] {
            #expect(plan.nextWindow(for: 0)?.lowerBound == expected)
            plan.finished(0)
        }
        // Connection 0's segment is done; connection 1 still has 600..<1000 unrequested: 0 takes 800..<1000.
        #expect(plan.nextWindow(for: 0) == 800..<900)
        plan.finished(0)
        #expect(plan.nextWindow(for: 0) == 900..<1000)
        plan.finished(0)
        // 600..<800 is left to connection 1: split once more, then too small to split.
        #expect(plan.nextWindow(for: 0) == 700..<800)
        plan.finished(0)
        #expect(plan.nextWindow(for: 0) == nil)
        plan.finished(1)
        #expect(plan.nextWindow(for: 1) == 600..<700)
        plan.finished(1)
        #expect(plan.nextWindow(for: 1) == nil && plan.isComplete)
    }

    @Test("With a segment size, connections take windows in file order")
    func inOrder() {
        var plan = SegmentPlan(missing: [10..<450], connections: 3, window: 100, minimumSegment: 400, segmentSize: 100)
        #expect(plan.nextWindow(for: 0) == 10..<110)
        #expect(plan.nextWindow(for: 1) == 110..<210)
        #expect(plan.nextWindow(for: 2) == 210..<310)
        plan.finished(1)
        #expect(plan.nextWindow(for: 1) == 310..<410)
        plan.finished(0)
        #expect(plan.nextWindow(for: 0) == 410..<450)
        plan.failed(2, received: 50)
        #expect(plan.nextWindow(for: 2) == 260..<310, "what a failed window did not bring comes first")
        for connection in 0..<3 { plan.finished(connection) }
        #expect(plan.nextWindow(for: 0) == nil && plan.isComplete)
    }

    @Test("A failed window gives back what did not arrive; any connection takes it")
    func failure() {
        var plan = SegmentPlan(missing: [0..<300], connections: 1, window: 100, minimumSegment: 300)
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
            var plan = SegmentPlan(
                missing: missing, connections: connections, window: window,
                minimumSegment: Int64.random(in: 1...500, using: &random),
                segmentSize: Bool.random(using: &random) ? window : nil)
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
