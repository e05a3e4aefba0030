import Foundation

/// One worker's life as a value (`downloader-fleet work`): claim a shard, download its URLs, commit results at least
/// once a second while the lease holds, renew the lease, and on SIGTERM stop claiming, hand the shard back and end.
/// Every event returns the actions the worker carries out against PostgreSQL and its `DownloadManager`; the database
/// and the downloads are the executor's (`Worker`). Tested without either (`WorkerMachineTests`).
public struct WorkerMachine: Sendable {
    public typealias Claim = LeaseRules.Claim

    /// A finished URL, not yet committed.
    public struct Outcome: Sendable, Equatable {
        public var url: String
        public var line: ResultLine

        public init(url: String, line: ResultLine) {
            self.url = url
            self.line = line
        }
    }

    public enum Phase: Sendable, Equatable {
        /// No shard: asks for one.
        case idle
        /// Asking the database for a shard.
        case claiming
        /// Downloading a shard's URLs.
        case working(Claim)
        /// SIGTERM while working: no more claims; what is done is committed, the shard handed back, then the end.
        case stopping(Claim)
        case ended
    }

    /// What the executor does next.
    public enum Action: Sendable, Equatable {
        /// Ask for a shard (claim with the lease).
        case claim
        /// Read the claim's URLs without a result and download them.
        case download(Claim)
        /// Commit these outcomes with the claim's token (fenced).
        case commit([Outcome], Claim)
        /// A stop's last commit: these outcomes and the shard's hand-back in one transaction (one wait for the
        /// database's flush instead of two, inside the stop's deadline).
        case commitAndHandBack([Outcome], Claim)
        /// Renew the claim's lease.
        case renew(Claim)
        /// Stop the downloads of a claim that no longer holds (another worker has the shard now).
        case abandon(Claim)
        /// Give the shard back now (its lease ends at once).
        case handBack(Claim)
        /// Wait a moment before asking again (every open shard is held by others).
        case waitAndClaim
        /// Nothing is left: the job is done (`--exit-when-done`).
        case exitDone
        /// The worker ends (after a stop).
        case exit
    }

    public private(set) var phase = Phase.idle
    /// Finished URLs not yet committed (kept across a lost connection: committed when it is back).
    public private(set) var pending: [Outcome] = []
    /// Whether a commit is under way (one at a time).
    public private(set) var committing = false
    /// Whether the commit under way also hands the shard back (a stop's `commitAndHandBack`).
    private var commitHandsBack = false
    /// Whether the current claim's downloads have all ended.
    public private(set) var downloadsEnded = false
    /// Stop once nothing is left to claim.
    public let exitsWhenDone: Bool
    /// Results that make a commit due before the second is over: what a SIGKILL can lose is at most this many and the
    /// downloads in flight, however fast files finish.
    public let commitBatch: Int

    public init(exitsWhenDone: Bool, commitBatch: Int = 64) {
        self.exitsWhenDone = exitsWhenDone
        self.commitBatch = max(1, commitBatch)
    }

    /// The worker starts.
    public mutating func start() -> [Action] {
        guard phase == .idle else { return [] }
        phase = .claiming
        return [.claim]
    }

    /// The claim came back: a shard, or none (`allDone`: no open shard is left at all).
    public mutating func claimed(_ claim: Claim?, allDone: Bool) -> [Action] {
        guard phase == .claiming else {
            // Stopped while asking: a shard claimed now goes back at once.
            return claim.map { [.handBack($0)] } ?? []
        }
        guard let claim else {
            phase = .idle
            if allDone && exitsWhenDone {
                phase = .ended
                return [.exitDone]
            }
            return [.waitAndClaim]
        }
        phase = .working(claim)
        downloadsEnded = false
        return [.download(claim)]
    }

    /// The wait before asking again is over.
    public mutating func waited() -> [Action] {
        guard phase == .idle else { return [] }
        phase = .claiming
        return [.claim]
    }

    /// A URL of `claim` finished (verified, or failed for good): committed with the next tick, or at once when
    /// `commitBatch` results wait. An outcome of a claim given up meanwhile (fenced, its lease lost) is dropped: the
    /// shard's new holder fetches what has no result.
    public mutating func finished(_ outcome: Outcome, of claim: Claim) -> [Action] {
        switch phase {
        case .working(claim):
            pending.append(outcome)
            return pending.count >= commitBatch ? commitIfDue(claim, force: false) : []
        case .stopping(claim):
            pending.append(outcome)
            return []
        case .idle, .claiming, .working, .stopping, .ended:
            return []
        }
    }

    /// The claim's downloads have all ended: commit what is left, then the next shard.
    public mutating func downloadsFinished(_ claim: Claim) -> [Action] {
        guard case .working(claim) = phase else { return [] }
        downloadsEnded = true
        return commitIfDue(claim, force: true)
    }

    /// A second passed (and the lease's renewal is due every third of it, the executor's clock).
    public mutating func tick(renewDue: Bool) -> [Action] {
        switch phase {
        case .working(let claim):
            return (renewDue ? [.renew(claim)] : []) + commitIfDue(claim, force: false)
        case .idle, .claiming, .stopping, .ended:
            return []
        }
    }

    private mutating func commitIfDue(_ claim: Claim, force: Bool) -> [Action] {
        guard !committing else { return [] }
        guard !pending.isEmpty else {
            if downloadsEnded && force { return nextShard(after: claim) }
            return []
        }
        committing = true
        return [.commit(pending, claim)]
    }

    /// The claim's work is over: its shard goes back (free for anyone if a URL is still missing, a no-op if done),
    /// and the next is asked for.
    private mutating func nextShard(after claim: Claim) -> [Action] {
        phase = .claiming
        return [.handBack(claim), .claim]
    }

    /// A commit ended: `accepted` (the token held: the outcomes are the database's now), `fenced` (another worker has
    /// the shard: nothing was committed, and none will be), or `failed` (the connection: tried again later).
    public enum CommitEnd: Sendable, Equatable { case accepted, fenced, failed }

    /// A commit of `outcomes` for `claim` ended.
    public mutating func committed(_ outcomes: [Outcome], for claim: Claim, _ end: CommitEnd) -> [Action] {
        committing = false
        let handedBack = commitHandsBack && end == .accepted
        commitHandsBack = false
        switch end {
        case .accepted:
            let sent = Set(outcomes.map(\.url))
            pending.removeAll { sent.contains($0.url) }
        case .fenced:
            // Not ours any more: the other holder fetches what has no result.
            pending.removeAll()
        case .failed:
            break  // kept; the next tick tries again
        }
        switch phase {
        case .working(claim) where end == .fenced:
            phase = .claiming
            return [.abandon(claim), .claim]
        case .working(claim) where downloadsEnded && end != .failed:
            return commitIfDue(claim, force: true)
        case .stopping(claim) where end == .accepted && !handedBack && !pending.isEmpty:
            // A commit was under way at the stop: what finished after it goes with the hand-back.
            committing = true
            commitHandsBack = true
            return [.commitAndHandBack(pending, claim)]
        case .stopping(claim):
            // Stopping: the last commit, then the end (a lost connection loses the last second's results, as a kill
            // would). The shard goes back unless it is not ours any more or that commit already gave it back.
            phase = .ended
            return end == .fenced || handedBack ? [.exit] : [.handBack(claim), .exit]
        default:
            return []
        }
    }

    /// The lease could not be renewed: another worker holds the shard (`lost`), or the database did not answer
    /// (kept working; the fence decides at the next commit).
    public mutating func renewalEnded(_ claim: Claim, lost: Bool) -> [Action] {
        guard lost, case .working(claim) = phase else { return [] }
        pending.removeAll()
        phase = .claiming
        return [.abandon(claim), .claim]
    }

    /// SIGTERM: stop claiming; what finished is committed and the shard handed back at once (one transaction; two
    /// when a commit was already under way), then the end.
    public mutating func stop() -> [Action] {
        switch phase {
        case .working(let claim):
            phase = .stopping(claim)
            if committing { return [.abandon(claim)] }  // that commit's end finishes the stop
            if pending.isEmpty {
                phase = .ended
                return [.abandon(claim), .handBack(claim), .exit]
            }
            committing = true
            commitHandsBack = true
            return [.abandon(claim), .commitAndHandBack(pending, claim)]
        case .idle, .claiming:
            phase = .ended
            return [.exit]
        case .stopping, .ended:
            return []
        }
    }
}
