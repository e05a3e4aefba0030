import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// `TransferReport`, the one ordered way up from a transfer to its manager (issue #51): news and retries reach the
/// actor in the order told and the end last, whatever the threads that told them; cancellation never loses the end.
@Suite("TransferReport")
struct TransferReportTests {
    func makeReport() -> TransferReport {
        TransferReport(
            written: 10, total: 100,
            placement: .init(
                journal: nil, url: URL(string: "http://example.test/f")!, options: DownloadOptions(),
                expectations: .none))
    }

    /// A message as text, to compare sequences.
    static func text(_ message: TransferReport.Message) -> String {
        switch message {
        case .said(.warning(let reason)): "warning \(reason)"
        case .said(.note(let message)): "note \(message)"
        case .retrying(let retry): "retry \(retry.attempt)"
        case .ended(let end, _): "ended \(end)"
        }
    }

    @Test("Told from many threads, read in the order told; the end is last, and nothing after it")
    func orderedFromThreads() async {
        let report = makeReport()
        // Four threads each tell 200 numbered notes; each thread's notes must arrive in its own order.
        await withTaskGroup(of: Void.self) { group in
            for thread in 0..<4 {
                group.addTask {
                    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                        Thread {
                            for index in 0..<200 { report.transferSays(.note("\(thread).\(index)")) }
                            done.resume()
                        }.start()
                    }
                }
            }
            // Reading while they tell.
            var seen: [Int: Int] = [:]
            var count = 0
            while count < 800, let message = await report.next() {
                guard case .said(.note(let text)) = message else {
                    Issue.record("unexpected \(Self.text(message))")
                    break
                }
                let parts = text.split(separator: ".").compactMap { Int($0) }
                #expect(parts[1] == seen[parts[0], default: 0], "thread \(parts[0]) out of order")
                seen[parts[0]] = parts[1] + 1
                count += 1
            }
            #expect(count == 800)
        }
        report.transferSays(.warning("last words"))
        report.ended(.cancelled, result: nil)
        report.transferSays(.note("after the end"))
        var rest: [String] = []
        while let message = await report.next() { rest.append(Self.text(message)) }
        #expect(rest == ["warning last words", "ended cancelled"])
        #expect(await report.next() == nil, "still nil")
    }

    @Test("A cancelled reader still gets every message and the end (a suspended download reports how it stopped)")
    func cancellationLosesNothing() async {
        let report = makeReport()
        let reader = Task {
            var texts: [String] = []
            while let message = await report.next() { texts.append(Self.text(message)) }
            return texts
        }
        reader.cancel()
        report.retrying(.init(attempt: 1, delay: 0.5, error: .cancelled(URL(string: "http://example.test/f")!)))
        report.ended(.failed(.cancelled(URL(string: "http://example.test/f")!)), result: nil)
        let texts = await reader.value
        #expect(texts.count == 2 && texts[0] == "retry 1" && texts[1].hasPrefix("ended failed"), "\(texts)")
    }

    @Test(
        "News told while running is delivered at once, in order, never the end; the rest comes after pumped(), or at once from rest()"
    )
    func deliveredWhileRunning() async {
        let seeds = UInt64(ProcessInfo.processInfo.environment["DOWNLOADER_REPORT_SEEDS"] ?? "") ?? 60
        for seed in 1...seeds {
            var random = SeededGenerator(seed: seed)
            let report = makeReport()
            let delivered = Locked<[String]>([])
            let told = Int(random.next() % 40)
            let before = Int(random.next() % 3)  // told before anyone delivers
            let yields = Int(random.next() % 3)  // how slow the actor is
            let threads = 1 + Int(random.next() % 3)
            for index in 0..<min(before, told) { report.transferSays(.note("0.\(index)")) }
            report.deliverWhileRunning { message in
                for _ in 0..<yields { await Task.yield() }
                delivered.withLock { $0.append(Self.text(message)) }
            }
            // The rest from threads, each its own numbered run (the first thread goes on after the early ones).
            await withTaskGroup(of: Void.self) { group in
                for thread in 0..<threads {
                    let range = thread == 0 ? min(before, told)..<told : 0..<told / 2
                    group.addTask {
                        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                            Thread {
                                for index in range { report.transferSays(.note("\(thread).\(index)")) }
                                done.resume()
                            }.start()
                        }
                    }
                }
            }
            report.ended(.cancelled, result: nil)
            var rest: [String] = []
            if seed % 2 == 0 {
                // What the generation's task does (`rest()`): one hand-over, after the pump if one runs.
                rest = await report.rest().map(Self.text)
            } else {
                await report.pumped()
                while let message = await report.next() { rest.append(Self.text(message)) }
            }
            let early = delivered.withLock { $0 }
            let all = early + rest
            #expect(rest.last == "ended cancelled" && !early.contains("ended cancelled"), "seed \(seed)")
            #expect(all.count == told + (threads - 1) * (told / 2) + 1, "seed \(seed): \(all.count)")
            var next: [Int: Int] = [:]
            for text in all.dropLast() {
                let parts = text.dropFirst(5).split(separator: ".").compactMap { Int($0) }
                #expect(parts[1] == next[parts[0], default: 0], "seed \(seed): thread \(parts[0]) out of order")
                next[parts[0]] = parts[1] + 1
            }
        }
    }

    @Test("News told while running reaches the actor before any end is told")
    func newsBeforeTheEnd() async {
        let report = makeReport()
        let (stream, continuation) = AsyncStream<String>.makeStream()
        report.deliverWhileRunning { continuation.yield(Self.text($0)) }
        report.retrying(.init(attempt: 1, delay: 0.5, error: .cancelled(URL(string: "http://example.test/f")!)))
        let first = await withTaskGroup(of: String?.self) { group in
            group.addTask {
                for await text in stream { return text }
                return nil
            }
            group.addTask {
                try? await Task.sleep(for: TestTime.scaled(.seconds(20)))  // a deadline, not synchronisation
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        #expect(first == "retry 1")
        report.ended(.cancelled, result: nil)
        await report.pumped()
        #expect(await report.next().map(Self.text) == "ended cancelled")
    }

    @Test("Counts are the latest told: bytes, total and requests in flight (never below zero)")
    func counts() {
        let report = makeReport()
        #expect(report.current == .init(written: 10, total: 100, requests: 0))
        report.transferProgressed(written: 50, total: 200)
        report.transferRequestsChanged(by: 1)
        report.transferRequestsChanged(by: 1)
        report.transferRequestsChanged(by: -1)
        #expect(report.current == .init(written: 50, total: 200, requests: 1))
        report.transferRequestsChanged(by: -5)
        #expect(report.current.requests == 0)
    }
}
