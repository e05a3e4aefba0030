import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Issue #25: one download's events as a stream, and callbacks that never run on the manager's actor.
@Suite("DownloadManager events of one download", .timeLimit(.minutes(TestTime.minutes(4))))
final class DownloadManagerEventsTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }

    init() throws {
        workspace = try TestWorkspace()
    }

    func makeManager() throws -> DownloadManager {
        try DownloadManager(configuration: .forTests(directory: workspace.directory))
    }

    /// Collects a stream until it ends.
    static func collect(_ stream: AsyncStream<DownloadEvent>) async -> [DownloadEvent] {
        var events: [DownloadEvent] = []
        for await event in stream { events.append(event) }
        return events
    }

    @Test("events(for:) has that URL's events only, from before it starts, and ends once it completes")
    func oneDownloadsEvents() async throws {
        let manager = try makeManager()
        let watched = server.url("/bytes/watched?size=600000&rate=1500000")
        let other = server.url("/bytes/other?size=600000&rate=1500000")
        let stream = await manager.events(for: watched)  // before the download starts
        let collector = Task { await Self.collect(stream) }
        async let first = manager.download(watched)
        async let second = manager.download(other)
        _ = try await (first, second)
        let events = await collector.value
        #expect(events.allSatisfy { $0.url == watched }, "\(events)")
        #expect(events.contains { $0.receipt?.state == .downloading })
        #expect(events.contains { if case .progress = $0 { true } else { false } })
        #expect(events.last?.receipt?.state == .completed, "ends with the completion: \(events)")
        await manager.shutdown()
    }

    @Test("events(of:) has exactly the events of those kinds that events() has, in the same order")
    func eventsOfSomeKinds() async throws {
        let manager = try makeManager()
        let all = await manager.events()
        let some = await manager.events(of: [.stateChanged, .removed])
        let none = await manager.events(of: [])
        let collectors = [all, some, none].map { stream in Task { await Self.collect(stream) } }
        let slow = server.url("/bytes/slow?size=400000&rate=1000000")  // progress events too
        _ = try await manager.download(slow)
        _ = try await manager.download(server.url("/bytes/small?size=1000"))
        await manager.forget(slow)
        await manager.shutdown()  // ends the streams
        let (every, chosen, nothing) = (await collectors[0].value, await collectors[1].value, await collectors[2].value)
        #expect(every.contains { $0.kind == .progress } && every.contains { $0.kind == .removed }, "\(every)")
        #expect(chosen == every.filter { $0.kind == .stateChanged || $0.kind == .removed }, "\(chosen)")
        #expect(nothing.isEmpty)
    }

    @Test("events(for:) of a completed or failed URL yields that state and ends; removal and shutdown end it too")
    func endings() async throws {
        let manager = try makeManager()
        let done = server.url("/bytes/done?size=1000")
        _ = try await manager.download(done)
        let completed = await Self.collect(await manager.events(for: done))
        #expect(completed.count == 1 && completed.first?.receipt?.state == .completed, "\(completed)")

        let missing = server.url("/status/404")
        let failingStream = await manager.events(for: missing)
        let failing = Task { await Self.collect(failingStream) }
        await #expect(throws: DownloadError.httpStatus) { try await manager.download(missing) }
        #expect(await failing.value.last?.receipt?.state == .failed)
        let afterwards = await Self.collect(await manager.events(for: missing))
        #expect(afterwards.count == 1 && afterwards.first?.receipt?.state == .failed)

        let slow = server.url("/bytes/removed?size=5000000&rate=200000")
        let removedStream = await manager.events(for: slow)
        let removed = Task { await Self.collect(removedStream) }
        await manager.enqueue(slow)
        #expect(await server.waitUntil { $0.bodyBytesSent > 0 })
        await manager.remove(slow)
        guard case .removed(let url) = await removed.value.last else {
            Issue.record("ends with .removed")
            return
        }
        #expect(url == slow)

        let never = server.url("/bytes/never?size=10")
        let waitingStream = await manager.events(for: never)
        let waiting = Task { await Self.collect(waitingStream) }
        await manager.shutdown()
        #expect(await waiting.value.isEmpty, "ends at shutdown")
    }

    @Test("Progress callbacks that block never hold up another download; completion comes once, after progress")
    func slowCallbacksBesideFastDownload() async throws {
        let manager = try makeManager()
        // Two downloads whose progress callbacks block: as many as the cooperative pool has threads on a two-core
        // machine, so callbacks run on that pool (or on the actor) would stall the fast download entirely.
        let slow = (1...2).map { server.url("/bytes/slowcallback\($0)?size=3000000&rate=1000000") }
        let fast = server.url("/bytes/fast?size=2000000")
        let entered = Locked(Set<URL>())
        let fastDone = Locked(false)
        // What each first call saw when it stopped blocking: whether the fast download had completed meanwhile.
        let firstCallSaw = Locked([URL: Bool]())
        let calls = Locked((progress: 0, completions: 0, progressAfterCompletion: 0))
        let completed = Locked(Set<URL>())
        for url in slow {
            await manager.enqueue(
                url,
                progress: { receipt in
                    entered.withLock { _ = $0.insert(receipt.url) }
                    // Blocks until the fast download completed, or 100 s (under ThreadSanitizer, beside the whole
                    // suite, the fast download has taken 29 s).
                    let deadline = TestTime.deadline(in: .seconds(100))
                    while !fastDone.withLock({ $0 }) && ContinuousClock.now < deadline { usleep(1000) }
                    let done = fastDone.withLock { $0 }
                    firstCallSaw.withLock { if $0[receipt.url] == nil { $0[receipt.url] = done } }
                    let after = completed.withLock { $0.contains(receipt.url) }
                    calls.withLock {
                        $0.progress += 1
                        if after { $0.progressAfterCompletion += 1 }
                    }
                },
                completion: { [url] _ in
                    completed.withLock { _ = $0.insert(url) }
                    calls.withLock { $0.completions += 1 }
                })
        }
        let deadline = TestTime.deadline(in: .seconds(100))
        while entered.withLock({ $0.count }) < 2 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(entered.withLock { $0.count } == 2, "both progress callbacks are blocking")
        let receipt = try await manager.download(fast)
        fastDone.withLock { $0 = true }
        #expect(receipt.state == .completed)
        for url in slow { _ = try await manager.download(url) }  // joins: returns once it is complete
        let completionDeadline = TestTime.deadline(in: .seconds(100))
        while calls.withLock({ $0.completions }) < 2 && ContinuousClock.now < completionDeadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(firstCallSaw.withLock { $0 } == Dictionary(uniqueKeysWithValues: slow.map { ($0, true) }))
        let counts = calls.withLock { $0 }
        #expect(counts.completions == 2 && counts.progress >= 2 && counts.progressAfterCompletion == 0, "\(counts)")
        await manager.shutdown()
    }
}
