import FleetCore
import Testing

/// The claim, lease and fence rules without a database (issue #49).
@Suite("LeaseRules")
struct LeaseRulesTests {
    @Test("A claim takes the first open shard nobody holds; each claim gets a new token")
    func claims() {
        var rules = LeaseRules()
        rules.add(shard: 1, urls: ["a", "b"])
        rules.add(shard: 2, urls: ["c"])
        let first = rules.claim(by: "n1", now: 0, lease: 30)
        check(first == .init(shard: 1, token: 1))
        check(rules.claim(by: "n2", now: 1, lease: 30) == .init(shard: 2, token: 1), "shard 1 is held (SKIP LOCKED)")
        check(rules.claim(by: "n3", now: 2, lease: 30) == nil)
        check(rules.claim(by: "n3", now: 31, lease: 30) == .init(shard: 1, token: 2), "the lease ended")
    }

    @Test("A stale token commits, renews and hands back nothing: the fence")
    func fence() {
        var rules = LeaseRules()
        rules.add(shard: 1, urls: ["a", "b"])
        let old = rules.claim(by: "stopped", now: 0, lease: 30)!
        check(rules.commit(["a": "ok"], for: old, now: 10))
        let new = rules.claim(by: "other", now: 40, lease: 30)!  // the stopped worker's lease ended
        check(rules.remaining(of: new) == ["b"], "a committed file is never fetched again")
        check(!rules.renew(old, now: 41, lease: 30))
        check(!rules.commit(["b": "failed"], for: old, now: 42), "the old holder commits nothing")
        rules.handBack(old)
        check(rules.shards[1]?.holder == "other", "nor hands the shard back")
        check(rules.commit(["b": "ok"], for: new, now: 43))
        check(rules.isComplete && rules.results["b"]?.status == "ok")
    }

    @Test("A hand-back frees the shard at once; the same URL is added once")
    func handBackAndAddOnce() {
        var rules = LeaseRules()
        rules.add(shard: 1, urls: ["a"])
        rules.add(shard: 2, urls: ["a"])  // already in shard 1: nothing added
        check(rules.shards.count == 1)
        let claim = rules.claim(by: "n1", now: 0, lease: 30)!
        rules.handBack(claim)
        check(rules.claim(by: "n2", now: 1, lease: 30) == .init(shard: 1, token: 2))
    }

    @Test("Lists are cut into shards as they stream; comments and blank lines are skipped")
    func list() {
        var list = URLList(shardSize: 2)
        var shards: [[String]] = []
        for line in ["# a comment", "", "http://h/a", "  http://h/b  ", "http://h/c\r"] {
            if let shard = list.line(Substring(line)) { shards.append(shard) }
        }
        if let last = list.end() { shards.append(last) }
        check(shards == [["http://h/a", "http://h/b"], ["http://h/c"]])
    }
}

/// `#expect` for a condition that calls a `mutating` method (the macro cannot capture one).
func check(_ condition: Bool, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(condition, comment, sourceLocation: sourceLocation)
}
