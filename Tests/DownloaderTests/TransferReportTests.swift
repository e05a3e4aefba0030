import Foundation
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
