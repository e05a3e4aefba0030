import Dispatch
import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

@Suite("QueuePool and Blocking")
struct QueuePoolTests {
    @Test("A queue given back is taken again; one in use is never handed out twice; more than it keeps are freed")
    func reuse() {
        let pool = QueuePool(label: "test.pool", keeps: 2)
        let first = pool.take()
        let second = pool.take()
        #expect(first !== second)
        pool.give(first)
        let again = pool.take()
        let third = pool.take()  // `first` and `second` are in use: a new one
        #expect(again === first && third !== first && third !== second)
        pool.give(first)
        pool.give(second)
        pool.give(third)
        #expect(pool.idleCount == 2)
    }

    /// Bodies that wait for each other finish only if each runs on a thread of its own: a queue handed to two bodies
    /// at once would hold the second behind the first, which waits for it (120 s without a new start, times
    /// `TestTime.scale`, then fails the test). The deadline is long and counts from the last start: with the whole suite running beside two busy
    /// loops, the tasks that start the bodies once waited 10 s for a cooperative thread.
    @Test("Blocking bodies running at once each get a queue (and a thread) of their own, also after reuse")
    func concurrentBodies() async {
        for round in 0..<3 {
            let count = 8
            let started = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let results = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<count {
                    group.addTask {
                        await Blocking.run { () -> Bool in
                            started.signal()
                            // Released by the waiter below in every case: the timeout is only a backstop.
                            return release.wait(timeout: .now() + 600 * TestTime.scale) == .success
                        }
                    }
                }
                // Every body started before any is released: they run at once. Waited for off the cooperative
                // threads, by one more body.
                let allStarted = await Blocking.run { () -> Bool in
                    // A deadline per start, not for all: a slow machine starts them slowly but steadily, while two
                    // bodies on one queue never start the second (a CI run under ThreadSanitizer took over 60 s to
                    // start all eight).
                    var all = true
                    for _ in 0..<count where started.wait(timeout: .now() + 120 * TestTime.scale) != .success {
                        all = false
                        break
                    }
                    for _ in 0..<count { release.signal() }
                    return all
                }
                var all: [Bool] = []
                for await result in group { all.append(result) }
                return (allStarted, all)
            }
            #expect(results.0, "round \(round): not every body started while the others waited")
            #expect(results.1.allSatisfy { $0 }, "round \(round)")
        }
        #expect(Blocking.queues.idleCount >= 1)  // kept for the next calls
    }
}
