import FleetCore
import Testing

/// A database call's deadline: a call that never answers (a wedged connection pool) does not hold its caller.
@Suite("Deadline")
struct DeadlineTests {
    struct Refused: Error, Equatable {}

    @Test("A call that answers gives its value; one that fails gives its error")
    func answers() async throws {
        let value = try await answered(within: 60) { 42 }
        #expect(value == 42)
        await #expect(throws: Refused.self) {
            try await answered(within: 60) { () async throws -> Int in throw Refused() }
        }
    }

    @Test("A call that never answers, even when cancelled, ends its caller with Unanswered")
    func neverAnswers() async throws {
        let error = await #expect(throws: Unanswered.self) {
            // Suspended for good: no answer, and cancellation does not reach it.
            try await answered(within: 0.2) { () async -> Int in await withCheckedContinuation { _ in } }
        }
        #expect(error?.seconds == 0.2)
    }
}
