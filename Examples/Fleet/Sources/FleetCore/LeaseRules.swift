import Foundation

/// The claim, lease and fence rules of shards, as values: what PostgreSQL carries out with `SELECT … FOR UPDATE SKIP
/// LOCKED` and a token per claim (`Schema`), modelled here so that every rule is tested without a database
/// (`LeaseRulesTests`, with seeded random sequences of workers that claim, stall past their lease, die and come back).
///
/// - A shard is claimed when it is open and nobody holds a lease on it that has not ended; each claim gets a new
///   token (the shard's counter, one more): the fencing token.
/// - A holder renews its lease, commits results and hands the shard back only with the token of its claim: once
///   another worker claimed the shard (the lease ended meanwhile — a worker stopped past it, a lost connection), the
///   old token is refused and nothing of the old holder is committed.
/// - A URL's result is committed once: a result for a URL that has one is ignored, so a shard taken over fetches only
///   what has no result yet, and a file whose result was committed is never fetched again.
/// - A shard is done when each of its URLs has a result; handing it back (SIGTERM) frees it at once, not after the lease.
public struct LeaseRules: Sendable, Equatable {
    /// One shard as the table holds it.
    public struct Shard: Sendable, Equatable {
        public var id: Int64
        /// The URLs without a result.
        public var remaining: Set<String>
        public var holder: String?
        /// The token of the last claim (0: never claimed).
        public var token: Int64 = 0
        /// When the lease ends (seconds, any monotonic clock); `nil`: not held.
        public var leaseEnd: Double?

        public init(id: Int64, urls: Set<String>) {
            self.id = id
            remaining = urls
        }

        public var isDone: Bool { remaining.isEmpty }

        /// Whether a lease holds at `now`.
        public func isHeld(at now: Double) -> Bool {
            guard holder != nil, let leaseEnd else { return false }
            return leaseEnd > now
        }
    }

    /// A claim: the shard, the token that fences everything its holder does, and the URLs it still has to fetch.
    public struct Claim: Sendable, Equatable, Hashable {
        public var shard: Int64
        public var token: Int64

        public init(shard: Int64, token: Int64) {
            self.shard = shard
            self.token = token
        }
    }

    public private(set) var shards: [Int64: Shard] = [:]
    /// Each URL's committed result (its status) and the claim that committed it.
    public private(set) var results: [String: (status: String, by: Claim)] = [:]

    public static func == (lhs: LeaseRules, rhs: LeaseRules) -> Bool {
        lhs.shards == rhs.shards && lhs.results.mapValues(\.status) == rhs.results.mapValues(\.status)
    }

    public init() {}

    /// A shard added (`downloader-fleet add`): URLs with a result already, or in another shard, are not added again.
    public mutating func add(shard id: Int64, urls: [String]) {
        let known = Set(shards.values.flatMap(\.remaining)).union(results.keys)
        let fresh = Set(urls).subtracting(known)
        guard !fresh.isEmpty else { return }
        shards[id] = Shard(id: id, urls: fresh)
    }

    /// A worker asks for a shard: the first open one that nobody holds, by id (`ORDER BY id … SKIP LOCKED`).
    /// - Returns: the claim, or `nil` when every open shard is held.
    public mutating func claim(by node: String, now: Double, lease: Double) -> Claim? {
        guard
            let id = shards.values.filter({ !$0.isDone && !$0.isHeld(at: now) }).map(\.id).min(),
            var shard = shards[id]
        else { return nil }
        shard.holder = node
        shard.token += 1
        shard.leaseEnd = now + lease
        shards[id] = shard
        return Claim(shard: id, token: shard.token)
    }

    /// The holder renews its lease. - Returns: whether the claim still holds (else the holder stops working on it).
    public mutating func renew(_ claim: Claim, now: Double, lease: Double) -> Bool {
        guard var shard = shards[claim.shard], shard.token == claim.token, shard.isHeld(at: now) else { return false }
        shard.leaseEnd = now + lease
        shards[claim.shard] = shard
        return true
    }

    /// The holder commits results. A claim that no longer holds commits nothing (the fence).
    /// - Returns: whether they were committed.
    public mutating func commit(_ outcomes: [String: String], for claim: Claim, now: Double) -> Bool {
        guard var shard = shards[claim.shard], shard.token == claim.token, shard.isHeld(at: now) else { return false }
        for (url, status) in outcomes where shard.remaining.contains(url) && results[url] == nil {
            results[url] = (status, claim)
            shard.remaining.remove(url)
        }
        if shard.isDone {
            shard.holder = nil
            shard.leaseEnd = nil
        }
        shards[claim.shard] = shard
        return true
    }

    /// The holder gives the shard back (SIGTERM): it is free at once.
    public mutating func handBack(_ claim: Claim) {
        guard var shard = shards[claim.shard], shard.token == claim.token else { return }
        shard.holder = nil
        shard.leaseEnd = nil
        shards[claim.shard] = shard
    }

    /// The URLs of a claim still to fetch (what `work` reads after its claim).
    public func remaining(of claim: Claim) -> Set<String> {
        shards[claim.shard]?.remaining ?? []
    }

    /// Whether every shard is done.
    public var isComplete: Bool { shards.values.allSatisfy(\.isDone) }
}
