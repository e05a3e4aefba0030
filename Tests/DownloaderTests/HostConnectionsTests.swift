import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// The per-host connection rules without a socket: the cap, rank order, "too many" and its recovery, and seeded
/// random sequences checked against invariants.
@Suite("HostConnections")
struct HostConnectionsTests {
    let host = "http://a:80"
    let second: UInt64 = 1_000_000_000

    /// `#expect` for a condition that calls a `mutating` method (the macro cannot capture one).
    func check(_ condition: Bool, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(condition, comment, sourceLocation: sourceLocation)
    }

    @Test("Requests beyond the cap wait and go, one per finished request, in rank order")
    func capAndRankOrder() {
        var connections = HostConnections(cap: 2)
        check(connections.request(1, host: host, rank: 10) == .go)
        check(connections.request(2, host: host, rank: 10) == .go)
        check(connections.request(3, host: host, rank: 30) == .wait)
        check(connections.request(4, host: host, rank: 20) == .wait)
        // Another host is not counted with this one.
        check(connections.request(5, host: "http://b:80", rank: 40) == .go)
        check(connections.finished(host: host, now: 0) == [4], "the older download's request first")
        check(connections.finished(host: host, now: 0) == [3])
        check(connections.finished(host: host, now: 0) == [])
        check(connections.finished(host: host, now: 0) == [])
        check(connections.finished(host: "http://b:80", now: 0) == [])
        #expect(connections.hosts.isEmpty, "idle hosts are forgotten")
    }

    @Test("Without a cap everything goes; a 503 alone is not \"too many\", a 503 beside others is")
    func tooMany() {
        var connections = HostConnections(cap: nil, recoveryInterval: 10 * second)
        for ticket in 1...5 { check(connections.request(ticket, host: host, rank: 0) == .go) }
        check(connections.refused(host: host, now: 0) == .tooMany, "four others were in flight")
        #expect(connections.limit(of: host) == 4)
        check(connections.finished(host: host, now: 0, ending: .refused) == [])
        check(connections.request(6, host: host, rank: 0) == .wait, "the refused request asks again")
        check(connections.refused(host: host, now: 0) == .tooMany)
        #expect(connections.limit(of: host) == 3)
        check(connections.finished(host: host, now: 0, ending: .refused) == [])
        check(connections.request(7, host: host, rank: 0) == .wait)
        check(connections.finished(host: host, now: 1) == [6], "a turn frees as a served request ends")
        // Alone on its host, a refusal is the server's answer to it: the download's retry rules take it.
        var alone = HostConnections(cap: nil)
        check(alone.request(1, host: host, rank: 0) == .go)
        check(alone.refused(host: host, now: 0) == .own)
        #expect(alone.limit(of: host) == nil)
    }

    @Test("A refusal naming a time (Retry-After) is its own, whatever else is in flight (issue #48)")
    func refusalWithATime() {
        var connections = HostConnections(cap: nil)
        for ticket in 1...8 { check(connections.request(ticket, host: host, rank: 0) == .go) }
        for _ in 1...8 { check(connections.refused(host: host, now: 0, namesTime: true) == .own) }
        #expect(connections.limit(of: host) == nil, "a rate limit is no connection limit")
        for _ in 1...8 { _ = connections.finished(host: host, now: 0, ending: .refused) }
        #expect(connections.hosts.isEmpty)
    }

    @Test("A 503 alone just after an answer there is \"settling\" (the server may still count it); later it is its own")
    func settling() {
        var connections = HostConnections(cap: nil, recoveryInterval: 10 * second, settleInterval: second)
        check(connections.request(1, host: host, rank: 0) == .go)
        check(connections.request(2, host: host, rank: 0) == .go)
        check(connections.finished(host: host, now: 0) == [], "the first is answered")
        check(
            connections.refused(host: host, now: second / 2) == .settling(attempt: 1),
            "the server may still count the first")
        #expect(connections.limit(of: host) == 1, "one at a time until the host settles")
        check(connections.finished(host: host, now: second / 2, ending: .refused) == [], "a refusal's end is no answer")
        check(connections.request(3, host: host, rank: 0) == .go)
        check(
            connections.refused(host: host, now: 3 * second / 2) == .own,
            "a second after the last excuse (and the answer before it): its own")
        check(connections.finished(host: host, now: 3 * second / 2, ending: .refused) == [])
        // One answer excuses four lone refusals, no more, each counted.
        check(connections.request(4, host: host, rank: 0) == .go)
        check(connections.finished(host: host, now: 2 * second) == [], "answered")
        let attempts = (1...HostConnections.settlingPerAnswer).map { HostConnections.Refusal.settling(attempt: $0) }
        #expect(attempts.count == 4)
        for expected in attempts + [.own] {
            check(connections.request(5, host: host, rank: 0) == .go)
            check(connections.refused(host: host, now: 2 * second) == expected)
            check(connections.finished(host: host, now: 2 * second, ending: .refused) == [])
        }
        // Two refused at once beside one being answered: the second counts only that one.
        var two = HostConnections(cap: nil, recoveryInterval: 10 * second)
        for ticket in 1...3 { check(two.request(ticket, host: host, rank: 0) == .go) }
        check(two.refused(host: host, now: 0) == .tooMany)
        check(two.refused(host: host, now: 0) == .tooMany)
        #expect(two.limit(of: host) == 1)
    }

    @Test("Each excused lone refusal opens the window again: a slow machine's pauses do not run it out")
    func settlingWindowFollowsTheExcuses() {
        var connections = HostConnections(cap: nil, recoveryInterval: 100 * second, settleInterval: 5 * second)
        check(connections.request(1, host: host, rank: 0) == .go)
        check(connections.finished(host: host, now: 0) == [], "answered at 0 s")
        // Four refusals 4 s apart: each within 5 s of the excuse before it, the last 16 s after the answer.
        for attempt in 1...4 {
            let now = UInt64(attempt) * 4 * second
            check(connections.request(1 + attempt, host: host, rank: 0) == .go)
            check(connections.refused(host: host, now: now) == .settling(attempt: attempt), "refusal \(attempt)")
            check(connections.finished(host: host, now: now, ending: .refused) == [])
        }
        check(connections.request(9, host: host, rank: 0) == .go)
        check(connections.refused(host: host, now: 17 * second) == .own, "a fifth is the request's own")
        check(connections.finished(host: host, now: 17 * second, ending: .refused) == [])
        // After a new answer, a refusal more than 5 s after it (and no excuse between) is its own.
        check(connections.request(10, host: host, rank: 0) == .go)
        check(connections.finished(host: host, now: 20 * second) == [])
        check(connections.request(11, host: host, rank: 0) == .go)
        check(connections.refused(host: host, now: 26 * second) == .own)
    }

    @Test("A lone refusal judged late is excused when its request went within the window (a loaded client)")
    func settlingJudgedLate() {
        var connections = HostConnections(cap: nil, recoveryInterval: 100 * second, settleInterval: 5 * second)
        check(connections.request(1, host: host, rank: 0) == .go)
        check(connections.finished(host: host, now: 0) == [], "answered at 0 s")
        // Asked again 1 s after the answer; the 503 is judged 7 s later (the client's threads did not run meanwhile).
        check(connections.request(2, host: host, rank: 0) == .go)
        check(connections.refused(host: host, now: 8 * second, sentAt: second) == .settling(attempt: 1))
        check(connections.finished(host: host, now: 8 * second, ending: .refused) == [])
        // The window now follows that excuse (8 s): a request that went at 12 s is excused, one at 14 s is not.
        check(connections.request(3, host: host, rank: 0) == .go)
        check(connections.refused(host: host, now: 20 * second, sentAt: 12 * second) == .settling(attempt: 2))
        check(connections.finished(host: host, now: 20 * second, ending: .refused) == [])
        check(connections.request(4, host: host, rank: 0) == .go)
        check(connections.refused(host: host, now: 26 * second, sentAt: 26 * second) == .own, "went 6 s after")
    }

    @Test("The gate's pauses for lone refusals after one answer double: 0.25, 0.5, 1 and 2 s, then the retry rules")
    func settlingPausesDouble() async {
        let gate = ConnectionGate(cap: nil)
        #expect(await gate.enter(host, rank: 0))
        gate.leave(host, taskIdentifier: 1, answered: true)
        var pauses: [ConnectionGate.Pause] = []
        for id in 2...6 {
            #expect(await gate.enter(host, rank: 0))
            let tooMany = gate.refuse(host, taskIdentifier: id, retryAfter: nil)
            #expect(tooMany == (id < 6), "the fifth lone refusal is the request's own")
            if let pause = gate.takeRefusal(id) { pauses.append(pause) }
            gate.leave(host, taskIdentifier: id, answered: false)
        }
        #expect(pauses.map(\.delay) == [0.25, 0.5, 1, 2])
        #expect(pauses.allSatisfy { $0.holdsTurn })
    }

    @Test("A lowered limit rises by one per interval without a refusal, up to the number refused, then is forgotten")
    func recovery() {
        var connections = HostConnections(cap: nil, recoveryInterval: 10 * second)
        for ticket in 1...3 { check(connections.request(ticket, host: host, rank: 0) == .go) }
        check(connections.refused(host: host, now: 0) == .tooMany)
        #expect(connections.limit(of: host) == 2)
        check(connections.finished(host: host, now: 0, ending: .refused) == [])
        check(connections.request(4, host: host, rank: 0) == .wait)
        check(connections.tick(now: 9 * second) == [])
        check(connections.tick(now: 10 * second) == [4], "the limit rose to 3, the number refused: forgotten")
        #expect(connections.limit(of: host) == nil)
        // With a cap, the lowered limit never exceeds it.
        var capped = HostConnections(cap: 2, recoveryInterval: second)
        check(capped.request(1, host: host, rank: 0) == .go)
        check(capped.request(2, host: host, rank: 0) == .go)
        check(capped.refused(host: host, now: 0) == .tooMany)
        #expect(capped.limit(of: host) == 1)
        check(capped.tick(now: 5 * second) == [])
        #expect(capped.limit(of: host) == 2)
    }

    @Test("A waiting request that gives up leaves the queue; one that went already does not")
    func withdraw() {
        var connections = HostConnections(cap: 1)
        check(connections.request(1, host: host, rank: 0) == .go)
        check(connections.request(2, host: host, rank: 0) == .wait)
        check(connections.request(3, host: host, rank: 0) == .wait)
        check(connections.withdraw(2))
        check(!connections.withdraw(2))
        check(!connections.withdraw(1), "it went: its caller owes a finished")
        check(connections.finished(host: host, now: 0) == [3])
        check(!connections.withdraw(3), "it waited, then went: its caller owes a finished")
    }

    @Test("Seeded random sequences: never more in flight than the limit allows, nobody left waiting at the end")
    func randomSequences() {
        let seeds =
            ProcessInfo.processInfo.environment["DOWNLOADER_HOSTS_SEED"].flatMap { UInt64($0) }.map { [$0] }
            ?? Array(1...50)
        var problems: [String] = []
        for seed in seeds {
            var random = SeededGenerator(seed: seed)
            let cap = Bool.random(using: &random) ? Int.random(in: 1...4, using: &random) : nil
            var connections = HostConnections(cap: cap, recoveryInterval: 5, settleInterval: 4)
            let hosts = ["h0", "h1", "h2"]
            var inFlight: [String: Int] = [:]
            /// Of those, the refused ones (their end is no answer), and when an answered one last ended.
            var refused: [String: Int] = [:]
            var answered: [String: (at: UInt64, excused: Int)] = [:]
            var waiting: [HostConnections.Ticket: String] = [:]
            /// Tickets that waited and went: withdrawing one finds nothing to withdraw.
            var went: [HostConnections.Ticket] = []
            var now: UInt64 = 0
            var nextTicket = 0
            /// Counts tickets that went; `host`, when given, is the only host they may belong to.
            func admitted(_ tickets: [HostConnections.Ticket], of host: String? = nil) {
                for ticket in tickets {
                    let owner = waiting.removeValue(forKey: ticket)
                    went.append(ticket)
                    if owner == nil || (host != nil && owner != host) {
                        problems.append("seed \(seed): a ticket not waiting there")
                    }
                    if let owner {
                        inFlight[owner, default: 0] += 1
                        if inFlight[owner, default: 0] > (connections.limit(of: owner) ?? .max) {
                            problems.append("seed \(seed): a waiting request went over the limit")
                        }
                    }
                }
            }
            for _ in 0..<300 {
                now += UInt64.random(in: 0...3, using: &random)
                let host = hosts.randomElement(using: &random)!
                let kind = Int.random(in: 0..<10, using: &random)
                switch kind {
                case 0..<4:
                    if kind < 2 {
                        // At once, as `request` would let it go: with room, and nobody waiting there.
                        let room = inFlight[host, default: 0] < (connections.limit(of: host) ?? .max)
                        let somebodyWaits = waiting.values.contains(host)
                        if connections.requestAtOnce(host: host) {
                            if !room || somebodyWaits {
                                problems.append("seed \(seed): went at once, full or past others")
                            }
                            inFlight[host, default: 0] += 1
                            break
                        }
                        if room && !somebodyWaits { problems.append("seed \(seed): did not go at once with room") }
                    }
                    let ticket = nextTicket
                    nextTicket += 1
                    let before = inFlight[host, default: 0]
                    if connections.request(ticket, host: host, rank: UInt64.random(in: 0...3, using: &random))
                        == .go
                    {
                        if before >= (connections.limit(of: host) ?? .max) {
                            problems.append("seed \(seed): over the limit")
                        }
                        inFlight[host, default: 0] += 1
                    } else {
                        waiting[ticket] = host
                    }
                case 4..<7 where inFlight[host, default: 0] > 0:
                    // The one that ends is a refused one, or one answered whole, or one that failed.
                    let refusedOne =
                        refused[host, default: 0] == inFlight[host, default: 0]
                        || (refused[host, default: 0] > 0 && Bool.random(using: &random))
                    let ending: HostConnections.Ending =
                        refusedOne ? .refused : Int.random(in: 0..<4, using: &random) == 0 ? .other : .answered
                    inFlight[host, default: 0] -= 1
                    if ending == .refused { refused[host, default: 0] -= 1 }
                    if ending == .answered { answered[host] = (now, 0) }
                    admitted(connections.finished(host: host, now: now, ending: ending), of: host)
                case 7 where inFlight[host, default: 0] > refused[host, default: 0]:
                    refused[host, default: 0] += 1
                    let others = inFlight[host, default: 0] - refused[host, default: 0]
                    // When the request went: up to 6 (past the window) before it is judged, or not known.
                    let sentAt = Bool.random(using: &random) ? nil : now - min(now, .random(in: 0...6, using: &random))
                    let excused =
                        answered[host].map {
                            (sentAt ?? now) < $0.at + 4 && $0.excused < HostConnections.settlingPerAnswer
                        } == true
                    let attempt = (answered[host]?.excused ?? 0) + 1
                    let expected: HostConnections.Refusal =
                        others > 0 ? .tooMany : excused ? .settling(attempt: attempt) : .own
                    if others == 0 && excused { answered[host] = (now, attempt) }
                    if connections.refused(host: host, now: now, sentAt: sentAt) != expected {
                        problems.append("seed \(seed): refusal misjudged, \(expected) expected")
                    }
                case 8:
                    if Bool.random(using: &random), let ticket = went.randomElement(using: &random) {
                        if connections.withdraw(ticket) { problems.append("seed \(seed): withdrew a ticket that went") }
                    } else if let ticket = waiting.keys.randomElement(using: &random) {
                        if !connections.withdraw(ticket) { problems.append("seed \(seed): a waiting ticket unknown") }
                        waiting[ticket] = nil
                    }
                default:
                    admitted(connections.tick(now: now))
                }
                for host in hosts where waiting.values.contains(host) {
                    // Someone waits only while the host is full.
                    if inFlight[host, default: 0] < (connections.limit(of: host) ?? .max) {
                        problems.append("seed \(seed): \(host) has a request waiting with room")
                    }
                }
            }
            // Everything in flight ends: every waiting request goes in turn, and then ends too.
            for host in hosts {
                while inFlight[host, default: 0] > 0 {
                    inFlight[host, default: 0] -= 1
                    let wasRefused = refused[host, default: 0] > 0
                    if wasRefused { refused[host, default: 0] -= 1 }
                    admitted(
                        connections.finished(host: host, now: now, ending: wasRefused ? .refused : .other), of: host)
                }
            }
            if !waiting.isEmpty { problems.append("seed \(seed): \(waiting.count) requests never went") }
            if !connections.tick(now: now + 1_000).isEmpty { problems.append("seed \(seed): a late admission") }
        }
        // Collected rather than expected one by one: thousands of `#expect` calls hold a pool thread for long.
        #expect(problems.isEmpty, "\(problems.prefix(5)) (replay one with DOWNLOADER_HOSTS_SEED=N)")
    }
}
