import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The bridge between URLSession's delegate and the transfers: who touches a sink's state (issue #51).
@Suite("SessionBridge")
final class SessionBridgeTests {
    let server: HTTPTestServer

    init() throws {
        server = try HTTPTestServer()
    }

    deinit {
        server.stopInBackground()
    }

    /// A sink that accepts any response and notes, for each call, whether it came on the delegate queue (an
    /// `OperationQueue`; a cancelling task's thread and the watchdog's dispatch queue are not one).
    final class RecordingSink: TransferSink, @unchecked Sendable {
        let calls = Locked<[(name: String, onDelegateQueue: Bool)]>([])

        private func note(_ name: String) {
            let onQueue = OperationQueue.current != nil
            calls.withLock { $0.append((name, onQueue)) }
        }

        func receive(response: URLResponse) -> RequestEnd? {
            note("receive(response:)")
            return nil
        }

        func receive(data: Data) -> RequestEnd? {
            note("receive(data:)")
            return nil
        }

        func complete(error: (any Error)?) -> RequestEnd {
            note("complete(error:)")
            return .finished
        }

        func keepsData(after end: RequestEnd) -> Bool {
            note("keepsData(after:)")
            return false
        }

        var offQueue: [String] { calls.withLock { $0.filter { !$0.onDelegateQueue }.map(\.name) } }
        var names: [String] { calls.withLock { $0.map(\.name) } }
    }

    @Test(
        "A request closed from outside (a cancel, the stall watchdog) never calls its sink off the delegate queue"
    )
    func sinkOnlyOnTheDelegateQueue() async throws {
        // Before: the bridge asked the sink `keepsData(after:)` on the closing thread, and ErrorBodySink's answer read
        // `pending`, which the delegate queue writes: a data race (issue #51). The head arrives, the body never does.
        // The watchdog's case closes whenever 1 s passes without activity: on a loaded machine that can be before the
        // response came (then only the rule is checked); the cancel waits for the response, whatever the load.
        for (name, stallTimeout, cancels) in [("cancelled", 600.0, true), ("stalled", 1.0, false)] {
            let bridge = SessionBridge(configuration: .init(stallTimeout: stallTimeout))
            let sink = RecordingSink()
            let request = URLRequest(url: server.url("/bytes/\(name)?size=100000&stallAfter=0&stall=60"))
            let running = Task { await bridge.performAuthorized(request, sink: sink) }
            if cancels {
                let deadline = TestTime.deadline(in: .seconds(120))
                while !sink.names.contains("receive(response:)") && ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(5))  // polling an event with a deadline
                }
                #expect(sink.names.contains("receive(response:)"), "\(name): \(sink.names)")
                running.cancel()
            }
            let (end, _) = await running.value
            #expect(sink.offQueue.isEmpty, "\(name) (\(end)): called off the delegate queue: \(sink.offQueue)")
            bridge.invalidate()
        }
    }

    @Test("A request cancelled at any moment of its start ends, cancelled or finished")
    func cancelledWhileStarting() async throws {
        // A cancellation may come while the task is made, before it is registered, before it is resumed, or after.
        // Each seed cancels after a different number of yields (a random input, not synchronisation); a continuation
        // never resumed would hang, so each end has a deadline.
        let seeds = UInt64(ProcessInfo.processInfo.environment["DOWNLOADER_BRIDGE_SEEDS"] ?? "") ?? 40
        let bridge = SessionBridge(configuration: .init())
        defer { bridge.invalidate() }
        var cancelled = 0
        for seed in 1...seeds {
            var random = SeededGenerator(seed: seed)
            let sink = RecordingSink()
            let request = URLRequest(url: server.url("/bytes/start-\(seed)?size=2000"))
            let running = Task { await bridge.performAuthorized(request, sink: sink) }
            for _ in 0..<Int(random.next() % 40) { await Task.yield() }
            running.cancel()
            // The first of the end and a deadline (a deadline, not synchronisation); a hung request is left behind.
            let ended = await withCheckedContinuation { (answer: CheckedContinuation<RequestEnd?, Never>) in
                let answered = Locked(false)
                let give: @Sendable (RequestEnd?) -> Void = { end in
                    if answered.withLock({ done in
                        defer { done = true }; return !done
                    }) {
                        answer.resume(returning: end)
                    }
                }
                Task { give(await running.value.end) }
                Task {
                    try? await Task.sleep(for: TestTime.scaled(.seconds(30)))
                    give(nil)
                }
            }
            switch ended {
            case .cancelled?: cancelled += 1
            case .finished?: break
            default: Issue.record("seed \(seed): ended \(String(describing: ended))")
            }
        }
        #expect(cancelled > 0)
    }

    @Test("The session neither stores, sends nor parses cookies: the bridge's jar has them (issue #52)")
    func sessionLeavesCookiesAlone() {
        let bridge = SessionBridge()
        defer { bridge.invalidate() }
        let configuration = bridge.sessionConfiguration
        #expect(configuration.httpCookieStorage == nil)
        #expect(!configuration.httpShouldSetCookies)
        // Anything else and corelibs parses every header line of every response as a cookie before it finds no storage
        // (`_EasyHandle.setCookies(headerData:)`; issue #52). That a server's cookies still reach the jar is
        // `DownloadManagerTests`' and the redirect gate's (#36) to show.
        #expect(configuration.httpCookieAcceptPolicy == .never)
    }
}
