import Synchronization

/// When a claim's lease ends by this worker's own clock: the moment it asked for the lease (a claim, a renewal the
/// database granted) plus the lease's length.
///
/// The database sets the lease's end from its own clock when the request reaches it, so the end seen here comes no
/// later than the database's: once it has passed, a renewal or a commit will be refused (`lease_until > now()`), and
/// everything the worker starts from then on is work that the shard's next holder does again. A worker stopped past
/// its lease (`SIGSTOP`, a paused VM) learns it here as soon as it runs again, before any database call answers.
public final class LeaseDeadline: Sendable {
    private let held = Mutex<(claim: LeaseRules.Claim, end: ContinuousClock.Instant)?>(nil)

    public init() {}

    /// The database granted `claim`'s lease (a claim or a renewal) for a request sent at `sent`.
    /// - Parameters:
    ///   - claim: the claim; another claim's deadline is replaced.
    ///   - sent: when the request that the database granted was sent.
    ///   - lease: the lease's length in seconds.
    public func granted(_ claim: LeaseRules.Claim, sentAt sent: ContinuousClock.Instant, lease: Double) {
        let end = sent + .seconds(lease)
        held.withLock { held in
            // A late answer to an older renewal never shortens a later one's.
            if let current = held, current.claim == claim, current.end > end { return }
            held = (claim, end)
        }
    }

    /// Whether `claim`'s lease still holds at `now` by this clock (`false` for a claim it never granted).
    public func holds(_ claim: LeaseRules.Claim, at now: ContinuousClock.Instant = .now) -> Bool {
        held.withLock { held in
            guard let held, held.claim == claim else { return false }
            return now < held.end
        }
    }
}
