import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Seeded random sequences of thousands of events through the lifecycle state machine, with a model of the executor
/// that checks, after every event: never more slots than the limit, starts in priority then FIFO/LIFO order, each
/// waiter answered exactly once, no two generations of one download running, a completed download has exactly one
/// file and every produced file is either kept or deleted, and the published state is the machine's.
@Suite("DownloadManager.StateMachine fuzzing")
struct DownloadManagerStateMachineFuzzTests {
    typealias Machine = DownloadManager.StateMachine<Int>

    static let checksums: [Checksum] = ["a", "b", "c"].map { Checksum(md5: String(repeating: $0, count: 32))! }

    /// The executor's side, as the actions describe it.
    struct Model {
        let prioritization: DownloadPrioritization
        /// Generations started and not yet ended, by key.
        var running: [Int: Int] = [:]
        var cancelled: Set<Int> = []
        /// Waiters registered and not yet answered.
        var pending: [Int: Int] = [:]
        var answered: Set<Int> = []
        /// The completed file of each key that has one (what the machine's `completedFile(of:)` must say).
        var files: [Int: URL] = [:]
        /// The waiting queue as publications describe it: key → (priority, sequence).
        var queue: [Int: (priority: Int, sequence: Int)] = [:]
        var priorities: [Int: Int] = [:]
        var sequence = 0
        /// Downloads waiting out a `Retry-After` out of the queue (`.wake` seen, `retryDue` not yet), and the places
        /// before every other that `retryDue` gives (FIFO: below every sequence).
        var delayed: Set<Int> = []
        var frontSequence = 0
        var verifications: [(key: Int, expectation: Checksum)] = []
        var published: [Int: DownloadState] = [:]
        var shutDownReports = 0
        /// Completed files released (forgotten, or gone and fetched again).
        var released = 0
        /// Requests refused because their expectation contradicted the download's own.
        var refusals = 0
        /// How often each kind of action was seen: the run must have exercised every path it claims to check.
        var seen: [String: Int] = [:]
        /// Requests whose options the owner keeps (`.hold` to `.releaseRequest`).
        var held: Set<Int> = []
        /// Completed files being looked at and not yet reported, by key: the request, its priority, what the look
        /// will find.
        var inspecting: [Int: (id: Int, priority: Int, intact: Bool)] = [:]

        /// Whether `key` is the first of the modelled queue.
        func isFirst(_ key: Int) -> Bool {
            guard let mine = queue[key] else { return false }
            return queue.values.allSatisfy { other in
                if other.priority != mine.priority { return other.priority < mine.priority }
                return prioritization == .fifo ? other.sequence >= mine.sequence : other.sequence <= mine.sequence
            }
        }
    }

    /// Applies actions to the model, checking each against it.
    /// - Parameters:
    ///   - produced: the generation that ended with a file in this event, which must be kept or discarded.
    ///   - endedKey: the key whose transfer ended in this event (it may continue in its own slot).
    static func apply(
        _ actions: [Machine.Action], to model: inout Model, machine: Machine, produced: Int? = nil,
        endedKey: Int? = nil, slotsBefore: Int, limit: Int, context: String
    ) {
        var producedSettled = produced == nil
        for action in actions {
            model.seen[Self.kind(of: action), default: 0] += 1
            if case .start(_, _, let start) = action, start.replacesCompletedFile {
                model.seen["replacement", default: 0] += 1
            }
            if case .fail(_, _, .mismatch) = action { model.seen["mismatch", default: 0] += 1 }
            if case .fail(_, _, .conflict) = action { model.seen["conflict", default: 0] += 1 }
            if case .warn(_, .conflict) = action { model.seen["conflict", default: 0] += 1 }
            if case .fail(_, _, .conflictingOptions) = action { model.seen["conflictingOptions", default: 0] += 1 }
            if case .warn(_, .conflictingOptions) = action { model.seen["conflictingOptions", default: 0] += 1 }
            switch action {
            case .start(let key, let generation, _):
                #expect(model.running[key] == nil, "two generations of \(key) running: \(context)")
                if model.queue[key] != nil {
                    let first = model.isFirst(key)
                    #expect(first, "\(key) started out of order, queue \(model.queue): \(context) → \(actions)")
                    model.queue[key] = nil
                } else {
                    #expect(key == endedKey, "\(key) started without being queued: \(context)")
                }
                model.running[key] = generation
            case .cancel(let key, let generation):
                #expect(model.running[key] == generation, "cancel of a generation not running: \(context)")
                model.cancelled.insert(generation)
            case .publish(let key, let state):
                model.published[key] = state
                model.delayed.remove(key)
                if state == .queued {
                    model.sequence += 1
                    model.queue[key] = (model.priorities[key] ?? 0, model.sequence)
                } else {
                    model.queue[key] = nil
                }
            case .succeed(let ids, _), .fail(let ids, _, _):
                for id in ids {
                    #expect(
                        model.pending.removeValue(forKey: id) != nil,
                        "waiter \(id) answered twice or unknown: \(context)")
                    model.answered.insert(id)
                }
            case .complete(let key, let generation, let replaced):
                #expect(generation == produced, "completed a file nobody produced: \(context)")
                producedSettled = true
                let earlier = model.files[key]
                model.files[key] = Self.file(key, generation)
                #expect(replaced == earlier, "the earlier file \(String(describing: earlier)) not released: \(context)")
            case .discardFiles(let key, let generation, let completedFile):
                if let generation, generation == produced { producedSettled = true }
                #expect(completedFile == model.files[key], "discarded another file than \(key)'s: \(context)")
                model.files[key] = nil
            case .releaseCompletedFile(let key, let file):
                #expect(file == model.files[key], "released another file than \(key)'s: \(context)")
                model.files[key] = nil
                model.released += 1
            case .verify(let key, let expectation):
                model.verifications.append((key, expectation))
            case .forget(let key, let keepsPlacedFile):
                // A forgetting that keeps the placed file (the journal's placement line may stand for the removal)
                // releases that file and deletes nothing.
                if keepsPlacedFile {
                    let released = actions.contains {
                        if case .releaseCompletedFile(key, _?) = $0 { true } else { false }
                    }
                    let discards = actions.contains { if case .discardFiles(key, _, _) = $0 { true } else { false } }
                    let cancels = actions.contains { if case .cancel(key, _) = $0 { true } else { false } }
                    #expect(
                        released && !discards && !cancels && model.running[key] == nil,
                        "kept a placed file it does not keep: \(context) → \(actions)")
                }
                model.published[key] = nil
                model.queue[key] = nil
            case .shutDownCompleted:
                model.shutDownReports += 1
            case .wake(let key, _):
                // Waits out of the queue until `retryDue`.
                model.queue[key] = nil
                model.delayed.insert(key)
            case .hold(_, let id):
                #expect(model.held.insert(id).inserted, "request \(id) held twice: \(context)")
            case .releaseRequest(let id):
                #expect(model.held.remove(id) != nil, "request \(id) released but not held: \(context)")
            case .inspectCompletedFile(let key, let id):
                #expect(model.held.contains(id), "inspection for a request not held: \(context)")
                #expect(model.files[key] != nil, "inspection of \(key), which has no completed file: \(context)")
            case .adoptOptions(_, _, let request):
                if let request { #expect(model.held.contains(request), "options of a request not held: \(context)") }
            case .recordFailure, .warn:
                break
            }
        }
        #expect(producedSettled, "a produced file was neither kept nor deleted: \(context)")
        #expect(machine.slotsInUse == model.running.count, "slots and running transfers disagree: \(context)")
        #expect(machine.slotsInUse <= max(limit, slotsBefore), "more slots than the limit: \(context)")
        for key in 0..<8 {
            #expect(machine.completedFile(of: key)?.url == model.files[key], "\(key)'s completed file: \(context)")
        }
        for (key, state) in model.published {
            #expect(
                machine.state(of: key) == state, "published \(state) for \(key), machine says otherwise: \(context)")
            if state == .completed { #expect(model.files[key] != nil, "completed \(key) without its file: \(context)") }
        }
    }

    @Test("Thousands of random events keep every invariant", arguments: [DownloadPrioritization.fifo, .lifo])
    func randomEvents(prioritization: DownloadPrioritization) async {
        var seen: [String: Int] = [:]
        // Pure value code has no data races to find: under ThreadSanitizer a tenth of the seeds keeps the
        // cooperative threads free for the tests that do (the invariants are still checked, each kind still seen).
        // DOWNLOADER_MACHINE_SEEDS=N runs N seeds by hand.
        let seeds = ProcessInfo.processInfo.environment["DOWNLOADER_MACHINE_SEEDS"].flatMap(Int.init)
        for seed in 0..<(seeds ?? (runsUnderSanitizer ? 12 : 60)) {
            seen.merge(await run(seed: UInt64(seed), prioritization: prioritization, events: 2_000)) { $0 + $1 }
        }
        for kind in [
            "start", "cancel", "complete", "succeed", "fail", "verify", "discardFiles", "forget", "replacement",
            "mismatch", "warn", "conflict", "conflictingOptions", "releaseCompletedFile", "wake", "retryDue",
            "inspectCompletedFile", "releaseRequest", "heldEvent",
        ] {
            #expect(
                seen[kind, default: 0] >= (runsUnderSanitizer ? 10 : 50),
                "the fuzzer exercised \(kind) only \(seen[kind, default: 0]) times")
        }
    }

    /// Runs one seeded sequence; returns how often each kind of action was seen.
    @discardableResult
    func run(seed: UInt64, prioritization: DownloadPrioritization, events: Int) async -> [String: Int] {
        var random = SeededGenerator(seed: seed)
        var limit = Int.random(in: 1...4, using: &random)
        var machine = Machine(limit: limit, prioritization: prioritization)
        var model = Model(prioritization: prioritization)
        var nextWaiter = 0
        var nextRequest = 0
        let keys = 0..<8
        for key in keys where Bool.random(using: &random) {
            let state = [DownloadState.completed, .suspended, .failed, .idle].randomElement(using: &random)!
            let file = state == .completed ? Self.file(key, 0) : nil
            machine.restore(
                key, state: state, checksum: state == .completed ? Self.checksums.randomElement(using: &random) : nil,
                completedFile: file.map { .init(url: $0, length: 1) })
            model.files[key] = file
            model.published[key] = machine.state(of: key)
        }

        for step in 0..<events {
            // Other tests share the two cooperative threads: a long synchronous loop would starve them.
            if step % 256 == 0 { await Task.yield() }
            let key = keys.randomElement(using: &random)!
            let slotsBefore = machine.slotsInUse
            var produced: Int?
            var endedKey: Int?
            let actions: [Machine.Action]
            let context: String
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<30:
                // A request for a download whose file is being looked at waits behind it; the model's queue places
                // are known only for requests carried out at once, so the fuzzer holds other events only.
                guard model.inspecting[key] == nil else { continue }
                nextWaiter += 1
                nextRequest += 1
                let waiter: Int? = Int.random(in: 0..<4, using: &random) == 0 ? nil : nextWaiter
                if let waiter { model.pending[waiter] = key }
                let expectation =
                    Int.random(in: 0..<3, using: &random) == 0 ? Self.checksums.randomElement(using: &random) : nil
                let priority = Int.random(in: 0..<3, using: &random)
                let phase = machine.phase(of: key)
                let intact = Int.random(in: 0..<5, using: &random) != 0
                context = "seed \(seed) step \(step): request \(key) waiter \(waiter.map(String.init) ?? "-")"
                // Another destination or file name now and then: refused by a download underway, taken otherwise.
                let contradiction = Int.random(in: 0..<6, using: &random) == 0 ? "another destination" : nil
                var deferred = false
                var asked = machine.request(
                    key, id: nextRequest, expectation: expectation, priority: priority, waiter: waiter,
                    contradiction: contradiction)
                if asked.contains(.inspectCompletedFile(key, nextRequest)) {
                    if Int.random(in: 0..<3, using: &random) == 0 {
                        // Reported later: events for this download are held meanwhile.
                        model.inspecting[key] = (nextRequest, priority, intact)
                        deferred = true
                    } else {
                        asked += machine.completedFileInspected(key, request: nextRequest, intact: intact)
                    }
                }
                actions = asked
                let refused = actions.contains {
                    switch $0 {
                    case .fail(_, _, .conflict), .warn(_, .conflict): return true
                    case .fail(_, _, .conflictingOptions), .warn(_, .conflictingOptions): return true
                    default: return false
                    }
                }
                let underway: Bool
                switch phase {
                case .queued, .running, .stopping: underway = true
                default: underway = false
                }
                if contradiction != nil && underway {
                    #expect(refused, "a request that contradicts a download underway joined it: \(context)")
                }
                if refused {
                    #expect(actions.count == 1, "a refused request changed the download: \(context) → \(actions)")
                    model.refusals += 1
                } else {
                    if !deferred {
                        Self.noteRequest(key, priority: priority, phase: phase, in: &model)
                    }
                }
            case 30..<40:
                if model.inspecting[key] != nil { model.seen["heldEvent", default: 0] += 1 }
                context = "seed \(seed) step \(step): suspend \(key)"
                actions = machine.suspend(key)
            case 40..<50:
                context = "seed \(seed) step \(step): resume \(key)"
                actions = machine.resume(key)
            case 50..<55:
                if model.inspecting[key] != nil { model.seen["heldEvent", default: 0] += 1 }
                if Bool.random(using: &random) {
                    context = "seed \(seed) step \(step): remove \(key)"
                    actions = machine.remove(key)
                } else {
                    // forget: the completed file stays on disk but is no longer the download's.
                    context = "seed \(seed) step \(step): forget \(key)"
                    actions = machine.remove(key, keepingCompletedFile: true)
                }
            case 55..<60:
                // Sorted: a dictionary's order differs from run to run, and a seed must replay.
                let pending = model.pending.sorted(by: { $0.key < $1.key })
                guard let (waiter, waiterKey) = pending.randomElement(using: &random) else { continue }
                context = "seed \(seed) step \(step): cancel waiter \(waiter)"
                actions = machine.cancelWaiter(waiter, of: waiterKey)
            case 60..<90:
                let running = model.running.sorted(by: { $0.key < $1.key })
                guard let (endingKey, generation) = running.randomElement(using: &random) else { continue }
                let end = Self.randomEnd(wasCancelled: model.cancelled.contains(generation), &random)
                model.running[endingKey] = nil
                if case .completed = end { produced = generation }
                endedKey = endingKey
                context = "seed \(seed) step \(step): \(endingKey) generation \(generation) ended \(end)"
                actions = machine.transferEnded(
                    endingKey, generation: generation, end, produced: Self.produced(endingKey, generation, end))
            case 96..<98:
                guard let key = model.delayed.sorted().randomElement(using: &random) else { continue }
                model.delayed.remove(key)
                if machine.phase(of: key) == .queued {
                    // The first place among its priority (FIFO), the newest (LIFO).
                    if prioritization == .fifo {
                        model.frontSequence -= 1
                        model.queue[key] = (model.priorities[key] ?? 0, model.frontSequence)
                    } else {
                        model.sequence += 1
                        model.queue[key] = (model.priorities[key] ?? 0, model.sequence)
                    }
                    model.seen["retryDue", default: 0] += 1
                }
                context = "seed \(seed) step \(step): retry due \(key)"
                actions = machine.retryDue(key)
            case 94..<96:
                guard
                    let (inspectedKey, inspection) = model.inspecting.sorted(by: { $0.key < $1.key }).randomElement(
                        using: &random)
                else { continue }
                model.inspecting[inspectedKey] = nil
                // The request is carried out now, in the phase the download has now (a verification may have queued
                // a newer version meanwhile).
                Self.noteRequest(
                    inspectedKey, priority: inspection.priority, phase: machine.phase(of: inspectedKey), in: &model)
                context = "seed \(seed) step \(step): inspected \(inspectedKey) intact \(inspection.intact)"
                actions = machine.completedFileInspected(
                    inspectedKey, request: inspection.id, intact: inspection.intact && model.files[inspectedKey] != nil)
            case 90..<94:
                guard !model.verifications.isEmpty else { continue }
                let (verifiedKey, expectation) = model.verifications.remove(
                    at: Int.random(in: 0..<model.verifications.count, using: &random))
                let actual = [expectation, Self.checksums.randomElement(using: &random)!, nil].randomElement(
                    using: &random)!
                context = "seed \(seed) step \(step): verified \(verifiedKey)"
                actions = machine.verified(verifiedKey, expectation: expectation, actual: actual)
            default:
                limit = Int.random(in: 1...4, using: &random)
                context = "seed \(seed) step \(step): limit \(limit)"
                actions = machine.setLimit(limit)
            }
            Self.apply(
                actions, to: &model, machine: machine, produced: produced, endedKey: endedKey, slotsBefore: slotsBefore,
                limit: limit, context: context)
        }

        // Wind down: shut down, let every transfer end and every verification report; then nobody may be waiting.
        Self.apply(
            machine.shutdown(), to: &model, machine: machine, slotsBefore: machine.slotsInUse, limit: limit,
            context: "seed \(seed): shutdown")
        for (key, inspection) in model.inspecting {
            #expect(!machine.hasShutDown, "seed \(seed): shut down while a completed file was being looked at")
            Self.apply(
                machine.completedFileInspected(key, request: inspection.id, intact: inspection.intact),
                to: &model, machine: machine, slotsBefore: machine.slotsInUse, limit: limit,
                context: "seed \(seed): inspected \(key) after shutdown")
        }
        while let (key, generation) = model.running.first {
            model.running[key] = nil
            let end = Self.randomEnd(wasCancelled: true, &random)
            var produced: Int?
            if case .completed = end { produced = generation }
            Self.apply(
                machine.transferEnded(key, generation: generation, end, produced: Self.produced(key, generation, end)),
                to: &model, machine: machine,
                produced: produced, endedKey: key, slotsBefore: machine.slotsInUse, limit: limit,
                context: "seed \(seed): wind down \(key)")
        }
        for (key, expectation) in model.verifications {
            Self.apply(
                machine.verified(key, expectation: expectation, actual: expectation), to: &model, machine: machine,
                slotsBefore: 0, limit: limit, context: "seed \(seed): verification after shutdown")
        }
        let unanswered = model.pending
        #expect(unanswered.isEmpty, "seed \(seed): waiters never answered: \(unanswered)")
        #expect(model.shutDownReports == 1, "seed \(seed): shutdown reported \(model.shutDownReports) times")
        #expect(machine.slotsInUse == 0)
        #expect(model.held.isEmpty, "seed \(seed): requests held for good: \(model.held)")
        return model.seen
    }

    static func kind(of action: Machine.Action) -> String {
        switch action {
        case .adoptOptions: "adoptOptions"
        case .publish: "publish"
        case .recordFailure: "recordFailure"
        case .start: "start"
        case .cancel: "cancel"
        case .complete: "complete"
        case .succeed: "succeed"
        case .fail: "fail"
        case .verify: "verify"
        case .discardFiles: "discardFiles"
        case .releaseCompletedFile: "releaseCompletedFile"
        case .forget: "forget"
        case .shutDownCompleted: "shutDownCompleted"
        case .warn: "warn"
        case .wake: "wake"
        case .hold: "hold"
        case .inspectCompletedFile: "inspectCompletedFile"
        case .releaseRequest: "releaseRequest"
        }
    }

    /// What a request carried out does to the modelled queue: the priority it gives, a new place for a waiting one.
    static func noteRequest(_ key: Int, priority: Int, phase: Machine.Phase?, in model: inout Model) {
        switch phase {
        case .queued:
            // A higher priority moves a waiting download: a new place in the queue.
            if priority > (model.priorities[key] ?? 0) {
                model.priorities[key] = priority
                // One waiting out a Retry-After is not in the queue: it goes in at `retryDue`.
                if !model.delayed.contains(key) {
                    model.sequence += 1
                    model.queue[key] = (priority, model.sequence)
                }
            }
        case .running, .stopping:
            break  // joins: the running download keeps its priority
        case nil:
            model.priorities[key] = priority
        case .idle, .suspended, .failed, .completed:
            if priority != 0 { model.priorities[key] = priority }  // 0 is unset: the download keeps its own
        }
    }

    /// Where generation `generation` of `key` puts its verified file (0: the one restored).
    static func file(_ key: Int, _ generation: Int) -> URL {
        URL(fileURLWithPath: "/files/\(key)/\(generation)")
    }

    /// The file a generation that ended with `end` produced.
    static func produced(_ key: Int, _ generation: Int, _ end: Machine.TransferEnd) -> Machine.CompletedFile? {
        guard case .completed = end else { return nil }
        return .init(url: file(key, generation), length: 1)
    }

    static func randomEnd(wasCancelled: Bool, _ random: inout SeededGenerator) -> Machine.TransferEnd {
        let roll = Int.random(in: 0..<10, using: &random)
        if wasCancelled {
            // Told to stop: usually it stops, but it may have completed or failed just before.
            switch roll {
            case 0..<6: return .cancelled
            case 6..<8: return .completed([checksums[0], checksums[1], nil].randomElement(using: &random)!)
            case 8: return .retryLater(after: 1, retriesMade: 1)  // decided just before the stop reached it
            default: return .failed(.connectionFailed)
            }
        }
        switch roll {
        case 0..<5: return .completed([checksums[0], checksums[1], nil].randomElement(using: &random)!)
        case 5..<7: return .failed(.connectionFailed)
        case 7..<9: return .retryLater(after: 2, retriesMade: Int.random(in: 1...3, using: &random))
        default: return .cancelled
        }
    }
}
