import FleetCore
import Foundation
import Testing

/// One worker's life as a value, then seeded random fleets against the lease rules (issue #49).
@Suite("WorkerMachine")
struct WorkerMachineTests {
    typealias Claim = LeaseRules.Claim

    static func outcome(_ url: String) -> WorkerMachine.Outcome {
        .init(url: url, line: ResultLine(url: url, status: "ok", time: "t", node: "n"))
    }

    @Test("Claim, download, commit once a second, next shard; at the end of the list, exit when asked")
    func happyPath() {
        var machine = WorkerMachine(exitsWhenDone: true, commitBatch: 3)
        let claim = Claim(shard: 1, token: 1)
        check(machine.start() == [.claim])
        check(machine.claimed(claim, allDone: false) == [.download(claim)])
        check(machine.finished(Self.outcome("a"), of: claim).isEmpty, "committed with the next tick")
        check(machine.tick(renewDue: true) == [.renew(claim), .commit([Self.outcome("a")], claim)])
        _ = machine.finished(Self.outcome("b"), of: claim)
        check(machine.tick(renewDue: false).isEmpty, "one commit at a time")
        check(machine.committed([Self.outcome("a")], for: claim, .accepted).isEmpty)
        check(machine.downloadsFinished(claim) == [.commit([Self.outcome("b")], claim)])
        check(machine.committed([Self.outcome("b")], for: claim, .accepted) == [.handBack(claim), .claim])
        check(machine.claimed(nil, allDone: true) == [.exitDone])
    }

    @Test("A commit is due at once when a batch of results waits: a kill loses at most the batch and the downloads")
    func batch() {
        var machine = WorkerMachine(exitsWhenDone: false, commitBatch: 2)
        let claim = Claim(shard: 1, token: 1)
        _ = machine.start()
        _ = machine.claimed(claim, allDone: false)
        check(machine.finished(Self.outcome("a"), of: claim).isEmpty)
        check(
            machine.finished(Self.outcome("b"), of: claim) == [.commit([Self.outcome("a"), Self.outcome("b")], claim)])
        check(machine.finished(Self.outcome("c"), of: claim).isEmpty, "one commit at a time")
        check(machine.finished(Self.outcome("d"), of: claim).isEmpty)
        check(
            machine.committed([Self.outcome("a"), Self.outcome("b")], for: claim, .accepted).isEmpty,
            "the rest waits for the tick")
        check(machine.tick(renewDue: false) == [.commit([Self.outcome("c"), Self.outcome("d")], claim)])
    }

    @Test("A fenced commit or a lost lease abandons the shard and claims another; a failed commit keeps its results")
    func fencedAndFailed() {
        var machine = WorkerMachine(exitsWhenDone: false)
        let claim = Claim(shard: 1, token: 1)
        _ = machine.start()
        _ = machine.claimed(claim, allDone: false)
        _ = machine.finished(Self.outcome("a"), of: claim)
        let commit = machine.tick(renewDue: false)
        check(machine.committed([Self.outcome("a")], for: claim, .failed).isEmpty)
        check(machine.pending.count == 1, "kept for when the database is back")
        check(machine.tick(renewDue: false) == commit)
        check(machine.committed([Self.outcome("a")], for: claim, .fenced) == [.abandon(claim), .claim])
        check(machine.pending.isEmpty)
        _ = machine.finished(Self.outcome("late"), of: claim)
        check(machine.pending.isEmpty, "a download of the abandoned claim that ends late is not committed")
        let next = Claim(shard: 2, token: 5)
        _ = machine.claimed(next, allDone: false)
        check(machine.renewalEnded(next, lost: true) == [.abandon(next), .claim])
    }

    @Test("SIGTERM: what finished is committed, the shard handed back at once, then the end")
    func stop() {
        var machine = WorkerMachine(exitsWhenDone: false)
        let claim = Claim(shard: 1, token: 1)
        _ = machine.start()
        _ = machine.claimed(claim, allDone: false)
        _ = machine.finished(Self.outcome("a"), of: claim)
        check(machine.stop() == [.abandon(claim), .commitAndHandBack([Self.outcome("a")], claim)])
        check(machine.committed([Self.outcome("a")], for: claim, .accepted) == [.exit], "handed back with the commit")
        // That commit failed (the database did not answer): the hand-back is tried alone.
        var failing = WorkerMachine(exitsWhenDone: false)
        _ = failing.start()
        _ = failing.claimed(claim, allDone: false)
        _ = failing.finished(Self.outcome("a"), of: claim)
        _ = failing.stop()
        check(failing.committed([Self.outcome("a")], for: claim, .failed) == [.handBack(claim), .exit])
        // A commit already under way at the stop: once it is answered, what finished after it goes with the hand-back.
        var busy = WorkerMachine(exitsWhenDone: false, commitBatch: 1)
        _ = busy.start()
        _ = busy.claimed(claim, allDone: false)
        check(busy.finished(Self.outcome("a"), of: claim) == [.commit([Self.outcome("a")], claim)])
        check(busy.stop() == [.abandon(claim)])
        check(busy.finished(Self.outcome("b"), of: claim) == [], "finished while stopping: kept for the last commit")
        check(
            busy.committed([Self.outcome("a")], for: claim, .accepted)
                == [.commitAndHandBack([Self.outcome("b")], claim)])
        check(busy.committed([Self.outcome("b")], for: claim, .accepted) == [.exit])
        // Nothing finished after it: the hand-back alone.
        var quiet = WorkerMachine(exitsWhenDone: false, commitBatch: 1)
        _ = quiet.start()
        _ = quiet.claimed(claim, allDone: false)
        _ = quiet.finished(Self.outcome("a"), of: claim)
        check(quiet.stop() == [.abandon(claim)])
        check(quiet.committed([Self.outcome("a")], for: claim, .accepted) == [.handBack(claim), .exit])
        var idle = WorkerMachine(exitsWhenDone: false)
        _ = idle.start()
        check(idle.stop() == [.exit])
        check(idle.claimed(claim, allDone: false) == [.handBack(claim)], "a claim after the stop goes back")
    }

    /// A worker in the simulation: its machine, whether it is stopped (SIGSTOP) or dead, and what it downloads.
    struct SimulatedWorker {
        var name: String
        var machine = WorkerMachine(exitsWhenDone: true, commitBatch: 3)
        var claim: Claim?
        var downloading: [String] = []
        var stopped = false
        var dead = false
        /// Commits sent, answered at the next step (a database round trip); `handBack`: a stop's last commit.
        var inFlight: [(outcomes: [WorkerMachine.Outcome], claim: Claim, handBack: Bool)] = []
        /// Waiting before asking again (every open shard held): asks at its next step.
        var waiting = false
    }

    @Test(
        "Seeded fleets: kills, stops past the lease, outages: one result a URL, no fetch after a result, all done"
    )
    func seededFleets() {
        // FLEET_SEEDS=N runs N seeds (thousands by hand); FLEET_SEED=S replays one; FLEET_TRACE prints each action.
        let environment = ProcessInfo.processInfo.environment
        let seeds =
            environment["FLEET_SEED"].flatMap(Int.init).map { $0...$0 }
            ?? 1...(environment["FLEET_SEEDS"].flatMap(Int.init) ?? 200)
        let trace = environment["FLEET_TRACE"] != nil
        for seed in seeds {
            var random = SeededRandom(seed: UInt64(seed))
            var rules = LeaseRules()
            let urls = (0..<Int.random(in: 5...60, using: &random)).map { "u\($0)" }
            for (index, chunk) in stride(from: 0, to: urls.count, by: 7).enumerated() {
                rules.add(shard: Int64(index + 1), urls: Array(urls[chunk..<min(chunk + 7, urls.count)]))
            }
            var workers = (0..<3).map { SimulatedWorker(name: "w\($0)") }
            var now = 0.0
            let lease = 30.0
            var databaseUp = true
            var fetchedAfterResult: [String] = []
            var heldAfterStop: [Int64] = []
            var actions: [Int: [WorkerMachine.Action]] = [:]
            for index in workers.indices { actions[index] = workers[index].machine.start() }

            func carryOut(_ index: Int) {
                var exited = false
                defer {
                    // A stop with the database up gives the shard back (once this round's actions are carried out,
                    // a claim that arrived after the stop's included): nobody waits for its lease to end.
                    let worker = workers[index]
                    if exited, databaseUp, let claim = worker.claim, let shard = rules.shards[claim.shard],
                        shard.token == claim.token, shard.holder == worker.name, shard.isHeld(at: now)
                    {
                        heldAfterStop.append(claim.shard)
                    }
                }
                while let action = actions[index]?.first {
                    actions[index]?.removeFirst()
                    if trace {
                        print(
                            "seed \(seed) w\(index) \(workers[index].machine.phase) pending \(workers[index].machine.pending.map(\.url)) -> \(action)"
                        )
                    }
                    var worker = workers[index]
                    switch action {
                    case .claim:
                        if !databaseUp {
                            actions[index, default: []] += worker.machine.claimed(nil, allDone: false)
                        } else {
                            let claim = rules.claim(by: worker.name, now: now, lease: lease)
                            if let claim {
                                worker.claim = claim
                                worker.downloading = []
                            }
                            actions[index, default: []] += worker.machine.claimed(claim, allDone: rules.isComplete)
                        }
                    case .download(let claim):
                        let todo = rules.remaining(of: claim)
                        worker.downloading = todo.sorted()
                        for url in worker.downloading where rules.results[url] != nil { fetchedAfterResult.append(url) }
                        if todo.isEmpty { actions[index, default: []] += worker.machine.downloadsFinished(claim) }
                    case .commit(let outcomes, let claim):
                        worker.inFlight.append((outcomes, claim, false))
                    case .commitAndHandBack(let outcomes, let claim):
                        worker.inFlight.append((outcomes, claim, true))
                    case .renew(let claim):
                        if databaseUp {
                            let held = rules.renew(claim, now: now, lease: lease)
                            actions[index, default: []] += worker.machine.renewalEnded(claim, lost: !held)
                        }
                    case .abandon: worker.downloading = []
                    case .handBack(let claim): if databaseUp { rules.handBack(claim) }
                    case .waitAndClaim: worker.waiting = true
                    case .exitDone: worker.dead = true
                    case .exit:
                        worker.dead = true
                        exited = true
                    }
                    workers[index] = worker
                }
            }

            for _ in 0..<4000 {
                now += Double.random(in: 0...3, using: &random)
                let index = Int.random(in: 0..<workers.count, using: &random)
                var worker = workers[index]
                switch Int.random(in: 0..<100, using: &random) {
                case 0..<2:  // SIGKILL, then a new process in its place
                    worker = SimulatedWorker(name: worker.name + "'")
                    workers[index] = worker
                    actions[index] = workers[index].machine.start()
                case 2..<4: worker.stopped.toggle(); workers[index] = worker  // SIGSTOP / SIGCONT
                case 4..<6: databaseUp.toggle()
                case 6..<8:  // SIGTERM: the worker commits, hands its shard back and ends
                    guard !worker.stopped, !worker.dead else { continue }
                    actions[index, default: []] += worker.machine.stop()
                    workers[index] = worker
                default:
                    guard !worker.stopped, !worker.dead else { continue }
                    // Commits sent earlier are answered.
                    for (outcomes, claim, handBack) in worker.inFlight {
                        let end: WorkerMachine.CommitEnd
                        if !databaseUp {
                            end = .failed
                        } else {
                            end =
                                rules.commit(
                                    Dictionary(uniqueKeysWithValues: outcomes.map { ($0.url, "ok") }), for: claim,
                                    now: now) ? .accepted : .fenced
                            if handBack && end == .accepted { rules.handBack(claim) }
                        }
                        actions[index, default: []] += worker.machine.committed(outcomes, for: claim, end)
                    }
                    worker.inFlight = []
                    if worker.waiting {
                        worker.waiting = false
                        actions[index, default: []] += worker.machine.waited()
                    }
                    if let url = worker.downloading.first {
                        worker.downloading.removeFirst()
                        actions[index, default: []] += worker.machine.finished(Self.outcome(url), of: worker.claim!)
                        if worker.downloading.isEmpty, let claim = worker.claim {
                            actions[index, default: []] += worker.machine.downloadsFinished(claim)
                        }
                    }
                    if Int.random(in: 0..<40, using: &random) == 0 {
                        // SIGTERM between a finish and the tick's commit: results wait, no commit under way.
                        actions[index, default: []] += worker.machine.stop()
                    }
                    actions[index, default: []] += worker.machine.tick(renewDue: Bool.random(using: &random))
                    workers[index] = worker
                }
                if !workers[index].stopped { carryOut(index) }
                if rules.isComplete && workers.allSatisfy(\.dead) { break }
            }
            // Every worker healthy, the database up: the rest is done.
            databaseUp = true
            for index in workers.indices where workers[index].dead && !rules.isComplete {
                workers[index] = SimulatedWorker(name: workers[index].name + "+")
                actions[index] = workers[index].machine.start()
            }
            for step in 0..<20000 where !rules.isComplete {
                now += 1
                let index = step % workers.count
                workers[index].stopped = false
                var worker = workers[index]
                for (outcomes, claim, handBack) in worker.inFlight {
                    let accepted = rules.commit(
                        Dictionary(uniqueKeysWithValues: outcomes.map { ($0.url, "ok") }), for: claim, now: now)
                    if handBack && accepted { rules.handBack(claim) }
                    actions[index, default: []] += worker.machine.committed(
                        outcomes, for: claim, accepted ? .accepted : .fenced)
                }
                worker.inFlight = []
                if worker.waiting {
                    worker.waiting = false
                    actions[index, default: []] += worker.machine.waited()
                }
                if let url = worker.downloading.first {
                    worker.downloading.removeFirst()
                    actions[index, default: []] += worker.machine.finished(Self.outcome(url), of: worker.claim!)
                    if worker.downloading.isEmpty, let claim = worker.claim {
                        actions[index, default: []] += worker.machine.downloadsFinished(claim)
                    }
                }
                actions[index, default: []] += worker.machine.tick(renewDue: true)
                workers[index] = worker
                if worker.dead && !rules.isComplete {
                    workers[index] = SimulatedWorker(name: worker.name + "+")
                    actions[index] = workers[index].machine.start()
                }
                carryOut(index)
            }
            check(rules.isComplete, "seed \(seed): not every URL has a result")
            check(Set(rules.results.keys) == Set(urls), "seed \(seed)")
            check(fetchedAfterResult.isEmpty, "seed \(seed): fetched after a result: \(fetchedAfterResult)")
            check(heldAfterStop.isEmpty, "seed \(seed): shards still held after a stop: \(heldAfterStop)")
        }
    }
}

/// A seeded generator (SplitMix64), so that a failing seed replays.
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
