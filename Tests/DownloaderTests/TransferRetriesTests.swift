import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// The retry rule of a generation as a value (issue #33): events in, actions out, no sockets.
@Suite("Transfer retries")
struct TransferRetriesTests {
    private let url = URL(string: "http://h.example/f")!
    private let backoff = Backoff(baseDelay: 1, maximumDelay: 30)

    @Test("Transient faults are retried up to the limit with growing delays; the next one fails the generation")
    func limit() {
        var retries = TransferRunner.Retries(limit: 3, backoff: backoff)
        var delays: [TimeInterval] = []
        for attempt in 1...3 {
            guard
                case .retry(let retry) = retries.attemptEnded(
                    .failed(.connectionFailed(url, reason: "reset")), cancelled: false, random: 1)
            else {
                Issue.record("attempt \(attempt) was not retried")
                return
            }
            #expect(retry.attempt == attempt)
            delays.append(retry.delay)
        }
        #expect(delays == [1, 2, 4])
        guard
            case .end(.failed(let error)) = retries.attemptEnded(.failed(.stalled(url, seconds: 30)), cancelled: false)
        else {
            Issue.record("a fourth retry")
            return
        }
        #expect(error == .stalled)
    }

    @Test("A fault that is not transient fails at once; Retry-After wins over the backoff; a cancel always ends")
    func rules() {
        var retries = TransferRunner.Retries(limit: 5, backoff: backoff)
        guard case .end(.failed) = retries.attemptEnded(.failed(.httpStatus(404, url: url)), cancelled: false) else {
            Issue.record("a 404 was retried")
            return
        }
        guard
            case .retry(let retry) = retries.attemptEnded(
                .failed(.httpStatus(503, url: url, retryAfter: 7)), cancelled: false, random: 0)
        else {
            Issue.record("a 503 was not retried")
            return
        }
        #expect(retry.delay == 7)
        guard
            case .end(.cancelled) = retries.attemptEnded(.failed(.connectionFailed(url, reason: "x")), cancelled: true)
        else {
            Issue.record("a cancelled generation retried")
            return
        }
        guard case .cancelled = retries.waitCancelled() else {
            Issue.record("a cancelled wait did not end the generation")
            return
        }
    }

    @Test("Seeded random attempt sequences: never more retries than the limit, never a retry of a lasting fault")
    func randomSequences() {
        let seed = UInt64(ProcessInfo.processInfo.environment["DOWNLOADER_RETRIES_SEED"] ?? "") ?? 33
        var random = SeededGenerator(seed: seed)
        let faults: [DownloadError] = [
            .connectionFailed(url, reason: "reset"), .stalled(url, seconds: 30), .httpStatus(503, url: url),
            .httpStatus(429, url: url, retryAfter: 5000), .httpStatus(404, url: url), .fileSystem(url, reason: "full"),
            .checksumMismatch(url, expected: "a", actual: "b"), .cancelled(url),
        ]
        for trial in 0..<1000 {
            let limit = Int.random(in: 0...6, using: &random)
            var retries = TransferRunner.Retries(limit: limit, backoff: backoff)
            var made = 0
            while true {
                let cancelled = Int.random(in: 0..<20, using: &random) == 0
                let end: TransferRunner.Retries.AttemptEnd =
                    Int.random(in: 0..<8, using: &random) == 0
                    ? .completed(nil) : .failed(faults.randomElement(using: &random)!)
                let action = retries.attemptEnded(
                    end, cancelled: cancelled, random: Double.random(in: 0..<1, using: &random))
                let context = "seed \(seed) trial \(trial)"
                switch (end, action) {
                case (.completed, .end(.completed)): break
                case (.failed(let error), .retry(let retry)):
                    made += 1
                    #expect(error.isTransient && !cancelled && error != .cancelled, "\(context): retried \(error)")
                    #expect(retry.attempt == made && made <= limit, "\(context)")
                    #expect(retry.delay >= 0 && retry.delay <= 3600, "\(context): \(retry.delay)")
                    continue
                case (.failed(let error), .end(.cancelled)):
                    #expect(cancelled || error == .cancelled, "\(context)")
                case (.failed(let error), .end(.failed(let reported))):
                    #expect(reported == error && !cancelled, "\(context)")
                    #expect(!error.isTransient || made == limit, "\(context): gave up early")
                default:
                    Issue.record("\(context): \(end) led to \(action)")
                }
                break
            }
        }
    }
}
