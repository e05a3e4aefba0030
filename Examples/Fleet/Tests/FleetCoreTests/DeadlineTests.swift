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

/// A lease's end by the worker's own clock: what it starts after it is work the next holder does again.
@Suite("LeaseDeadline")
struct LeaseDeadlineTests {
    let claim = LeaseRules.Claim(shard: 1, token: 1)

    @Test("A lease holds from the request the database granted until the lease's length has passed")
    func holdsUntilItsEnd() {
        let deadline = LeaseDeadline()
        let sent = ContinuousClock.now
        #expect(!deadline.holds(claim, at: sent), "never granted")
        deadline.granted(claim, sentAt: sent, lease: 6)
        #expect(deadline.holds(claim, at: sent + .seconds(5.9)))
        #expect(!deadline.holds(claim, at: sent + .seconds(6)))
        #expect(!deadline.holds(LeaseRules.Claim(shard: 1, token: 2), at: sent), "another claim of the shard")
    }

    @Test("A renewal extends the lease; a late answer to an older one never shortens it; a new claim replaces it")
    func renewals() {
        let deadline = LeaseDeadline()
        let sent = ContinuousClock.now
        deadline.granted(claim, sentAt: sent, lease: 6)
        deadline.granted(claim, sentAt: sent + .seconds(4), lease: 6)
        #expect(deadline.holds(claim, at: sent + .seconds(9)))
        deadline.granted(claim, sentAt: sent + .seconds(2), lease: 6)
        #expect(deadline.holds(claim, at: sent + .seconds(9)), "the older renewal answered last")
        let next = LeaseRules.Claim(shard: 2, token: 1)
        deadline.granted(next, sentAt: sent + .seconds(10), lease: 6)
        #expect(!deadline.holds(claim, at: sent + .seconds(9)))
        #expect(deadline.holds(next, at: sent + .seconds(15)))
    }
}
