import struct Foundation.URL

extension DownloadManager {
    /// The life of every download of a manager, as a value: phases, waiters, the waiting queue and the slots. Every
    /// event is a `mutating` method that returns the actions to carry out; it does no I/O, reads no clock and knows
    /// nothing of URLSession, so every interleaving can be tested without sockets (the shape of AsyncHTTPClient's
    /// `HTTPConnectionPool.StateMachine`).
    ///
    /// The rules it keeps:
    /// - At most `limit` slots are in use; a transfer holds its slot until it has really ended, also when it was told
    ///   to stop, so a stopped transfer never overlaps the next one of the same download.
    /// - One generation per download at a time. Suspend, resume and remove while a transfer stops change what
    ///   happens *after* it ends (`Next`); they never start a second transfer beside it. A transfer that completes
    ///   while it was being suspended counts as completed.
    /// - Each waiter is answered exactly once: when its download completes, fails, is suspended or removed, when the
    ///   manager shuts down, or when the waiter gives up. A waiter's own expectation is compared with the result.
    struct StateMachine<Key: Hashable> {
        typealias Generation = Int
        typealias WaiterID = Int
        typealias RequestID = Int

        /// Whether the manager accepts work.
        private enum Lifecycle {
            case running, shuttingDown, shutDown
        }

        // The machine's state: private, changed only by the events below. The entries' own rules are in
        // DownloadManager+StateMachine+Entry.swift, the slots and their queue in WaitingQueue.swift, its words (phases,
        // ends, failures, actions) in DownloadManager+StateMachine+Vocabulary.swift.
        private var entries: [Key: Entry] = [:]
        private var slots: Slots
        private var lifecycle = Lifecycle.running
        /// Completed files the owner is looking at (`.inspectCompletedFile`); the shutdown waits for them too.
        private var inspections = 0
        /// Waiters of a batch (`DownloadManager.download(_:maximumInFlight:)`) not answered yet: a download one of them
        /// is told completed is forgotten once settled (see `forgetAnsweredDownloads()`).
        private var forgettingWaiters: Set<WaiterID> = []
        /// Downloads a batch's waiter was told completed, to forget once settled.
        private var completedForBatches: [Key] = []

        /// Whether `shutdown()` was called.
        var isShuttingDown: Bool { lifecycle != .running }
        /// Whether `shutdown()` was called and every transfer has ended since (`.shutDownCompleted` was returned).
        var hasShutDown: Bool { lifecycle == .shutDown }
        /// How many slots may be in use.
        var limit: Int { slots.limit }
        /// Slots held by running and stopping transfers.
        var slotsInUse: Int { slots.inUse }

        init(limit: Int, prioritization: DownloadPrioritization) {
            slots = Slots(limit: limit, prioritization: prioritization)
        }

        // MARK: - Reading

        /// The phase of a download, `nil` when unknown or removed.
        func phase(of key: Key) -> Phase? {
            guard let entry = entries[key], !entry.isRemoved else { return nil }
            return entry.phase
        }

        /// The public state of a download, `nil` when unknown or removed.
        func state(of key: Key) -> DownloadState? {
            guard let entry = entries[key], !entry.isRemoved else { return nil }
            return entry.phase.state
        }

        /// Whether `key` is completed with nobody waiting and nothing being verified or inspected: forgetting it ends
        /// nothing.
        func isSettled(_ key: Key) -> Bool {
            guard let entry = entries[key], !entry.isRemoved, entry.phase == .completed else { return false }
            return entry.waiters.isEmpty && entry.verifying.isEmpty && entry.inspection == nil
        }

        /// Where the download's verified file is and how long it is, while it has one (also while a replacement of it
        /// downloads, and while a removed download's files wait to be deleted): the one record of it.
        func completedFile(of key: Key) -> CompletedFile? {
            entries[key]?.completedFile
        }

        /// Whether `generation` is the live transfer of `key` (running, not told to stop).
        func isRunning(_ key: Key, generation: Generation) -> Bool {
            entries[key]?.phase == .running(generation)
        }

        /// Whether a batch's waiter waits for `key`: once it is told the download completed, the download is forgotten
        /// (`forgetAnsweredDownloads()`), unless someone asks for it meanwhile.
        func isForgottenOnceCompleted(_ key: Key) -> Bool {
            guard !forgettingWaiters.isEmpty, let entry = entries[key] else { return false }
            return entry.waiters.contains { forgettingWaiters.contains($0.id) }
        }

        /// Whether `key` is suspended because its process stopped (a shutdown, a crash) rather than by `suspend`.
        func isInterrupted(_ key: Key) -> Bool {
            entries[key]?.isInterrupted ?? false
        }

        /// What a receipt shows of the machine's entry: the kept expectations and whether the download was
        /// interrupted (`expectations(of:)` and `isInterrupted(_:)` in one look-up).
        func receiptFacts(of key: Key) -> (expectations: KeptExpectations, isInterrupted: Bool) {
            guard let entry = entries[key] else { return (.none, false) }
            return (entry.keptExpectations, entry.isInterrupted)
        }

        /// What a request for `key` would be refused for now (`request` decides by it): the manager shut down, an
        /// expected checksum that contradicts the one the download keeps, or options that contradict those of a
        /// download underway; `nil` when it would be taken.
        func refusal(of key: Key, expectation: Checksum?, contradiction: String?) -> Failure? {
            if isShuttingDown { return .afterShutdown }
            let entry = entries[key] ?? Entry()
            if let expectation, entry.keepsItsExpectations, let kept = entry.contradiction(to: expectation) {
                return .conflict(kept: kept, requested: expectation)
            }
            if let contradiction, entry.isUnderway { return .conflictingOptions(contradiction) }
            return nil
        }

        // MARK: - Events from callers

        /// The expected checksums a download keeps, for saving.
        func expectations(of key: Key) -> KeptExpectations {
            entries[key]?.keptExpectations ?? .none
        }

        /// A download known from saved state, at start.
        /// - Parameters:
        ///   - checksum: the completed file's checksum, when known.
        ///   - expectations: the expected checksums it kept; a completed download's others are verifications asked
        ///     and not finished (`restoredVerifications()` starts them again).
        ///   - replacesCompletedFile: it has a completed file, which a newer version (interrupted) replaces once
        ///     verified; it comes back suspended, keeping the file.
        ///   - completedFile: where its completed file is, when it has one.
        mutating func restore(
            _ key: Key, state: DownloadState, checksum: Checksum?, expectations: KeptExpectations = .none,
            priority: Int = 0,
            replacesCompletedFile: Bool = false, interrupted: Bool = false, completedFile: CompletedFile? = nil
        ) {
            entries[key] = Entry(
                restoring: state, checksum: checksum, expectations: expectations, priority: priority,
                replacesCompletedFile: replacesCompletedFile, interrupted: interrupted)
            entries[key]?.completedFile = completedFile
        }

        /// A caller asks for a download (and, with a waiter, waits for it).
        ///
        /// A request continues a waiting, running or suspended download as it is, with the expected checksums it
        /// keeps; the request's expectation joins them (the next transfer verifies it when the download had none,
        /// else it is compared with the completed file). An expectation that contradicts the download's own (the
        /// same algorithm, another digest) is refused: its waiter fails at once, or, with none, a warning says so,
        /// and the download goes on unchanged. A failed download, or a completed one whose file is gone, starts a
        /// new attempt: with the request's expectation if it gives one, else with the ones it kept. A completed
        /// download whose file is there and has another digest of the request's algorithm may have a new version on
        /// the server: it is fetched and replaces the file only if it matches.
        ///
        /// A request for a completed download waits while the owner looks at the file (`.inspectCompletedFile`: is it
        /// there as recorded? it moves where the request asks) and reports `completedFileInspected`; what comes for
        /// that download meanwhile (requests, suspend, resume, remove) is held and follows it in order.
        /// - Parameters:
        ///   - id: the request's number, unique among the requests the owner keeps (`.hold` to `.releaseRequest`).
        ///   - expectation: the checksum the caller expects, if any.
        ///   - priority: higher starts first among waiting downloads.
        ///   - waiter: who to answer, if anyone waits.
        ///   - contradiction: what the request's options contradict in the download's own (another destination or
        ///     file name), if anything: a download that is waiting or running refuses it (one that rests takes the
        ///     request's options instead, and a completed one moves its file).
        ///   - forgetsWhenAnswered: the waiter is a batch's: once it is told the download completed, the download is
        ///     forgotten when it is settled (`forgetAnsweredDownloads()`), its file kept.
        mutating func request(
            _ key: Key, id: RequestID, expectation: Checksum?, priority: Int = 0, waiter: WaiterID?,
            contradiction: String? = nil, forgetsWhenAnswered: Bool = false
        ) -> [Action] {
            if forgetsWhenAnswered, let waiter { forgettingWaiters.insert(waiter) }
            let asked = HeldRequest(
                id: id, expectation: expectation, priority: priority, waiter: waiter, contradiction: contradiction)
            if entries[key]?.inspection != nil {
                entries[key]?.held.append(.request(asked))
                return [.hold(key, id)]
            }
            return take(key, asked, held: false)
        }

        /// The owner looked at the completed file for request `id` (`.inspectCompletedFile`): whether it is still
        /// there as recorded (and, if so, where the request asked). The request is carried out, then what was held
        /// behind it, in order, until one needs the file looked at again.
        /// - Parameters:
        ///   - movedTo: where the file is now, when it moved (or was copied) where the request asked.
        ///   - unplaced: the file is there but could not be put where the request asked (it stays where it was): the
        ///     request is answered with this error, or, with no waiter, it is said as a warning.
        mutating func completedFileInspected(
            _ key: Key, request id: RequestID, intact: Bool, movedTo: URL? = nil, unplaced: DownloadError? = nil
        ) -> [Action] {
            guard var entry = entries[key], let asked = entry.inspection, asked.id == id else { return [] }
            inspections -= 1
            entry.inspection = nil
            if let movedTo { entry.completedFile?.url = movedTo }
            var held = entry.held[...]
            entry.held = []
            entries[key] = entry
            var actions: [Action]
            if intact, let unplaced {
                let failure = Failure.unplaced(unplaced)
                actions = asked.waiter.map { [.fail([$0], key, failure)] } ?? [.warn(key, failure)]
            } else {
                actions = carryOut(key, asked, completedFileIsIntact: intact).map { $0.adopting(for: id) }
            }
            actions.append(.releaseRequest(id))
            while let event = held.first {
                guard entries[key]?.inspection == nil else {
                    entries[key]?.held = Array(held)
                    break
                }
                held.removeFirst()
                switch event {
                case .request(let next): actions += take(key, next, held: true)
                case .remove(let keeping): actions += remove(key, keepingCompletedFile: keeping)
                case .suspend: actions += suspend(key)
                case .resume: actions += resume(key)
                }
            }
            schedule(&actions)  // the shutdown may have waited for this inspection
            return actions
        }

        /// Carries out a request now, or, for a completed download, asks the owner to look at its file first.
        /// - Parameter held: the owner keeps the request's options already (it waited behind another).
        private mutating func take(_ key: Key, _ asked: HeldRequest, held: Bool) -> [Action] {
            let completed = entries[key].map { !$0.isRemoved && $0.phase == .completed } ?? false
            if completed && refusal(of: key, expectation: asked.expectation, contradiction: asked.contradiction) == nil
            {
                entries[key]?.inspection = asked
                inspections += 1
                return (held ? [] : [.hold(key, asked.id)]) + [.inspectCompletedFile(key, asked.id)]
            }
            let actions = carryOut(key, asked, completedFileIsIntact: false)
            return held ? actions.map { $0.adopting(for: asked.id) } + [.releaseRequest(asked.id)] : actions
        }

        /// A request, carried out (see `request(_:id:expectation:priority:waiter:contradiction:)`).
        /// - Parameter completedFileIsIntact: for a completed download, whether its file is still there as recorded.
        private mutating func carryOut(_ key: Key, _ asked: HeldRequest, completedFileIsIntact: Bool) -> [Action] {
            let (expectation, priority, contradiction) = (asked.expectation, asked.priority, asked.contradiction)
            let waiting = asked.waiter.map { Waiter(id: $0, expectation: expectation) }
            // Refused, and said also with nobody to tell (a warning, hence a log record): never dropped silently.
            if let refusal = refusal(of: key, expectation: expectation, contradiction: contradiction) {
                guard refusal == .afterShutdown else {
                    return waiting.map { [.fail([$0.id], key, refusal)] } ?? [.warn(key, refusal)]
                }
                return [.warn(key, refusal)] + (waiting.map { [.fail([$0.id], key, refusal)] } ?? [])
            }
            var entry = entries[key] ?? Entry()
            var actions: [Action] = []
            entry.pausedWhileVerifying = false  // a request lifts a caller's pause, as it resumes a suspended download
            switch entry.phase {
            case .stopping(let generation, _) where entry.isRemoved:
                // Removed a moment ago and wanted again: a new download, once the old files are gone.
                let discarded = entry.completedFile
                entry = Entry(phase: .stopping(generation, next: .resume), priority: priority, expectation: expectation)
                entry.completedFile = discarded
                entry.discardsFiles = true
                entry.waiters = waiting.map { [$0] } ?? []
                actions = [.adoptOptions(key, fresh: true), .publish(key, .downloading)]
            case .queued:
                if let waiting { entry.waiters.append(waiting) }
                entry.join(expectation, transferRuns: false)
                if priority > entry.priority {
                    entry.priority = priority
                    if !entry.waitsForRetry { slots.enqueue(key, priority: priority) }
                }
            case .running, .stopping(_, next: .resume):
                if let waiting { entry.waiters.append(waiting) }
                entry.join(expectation, transferRuns: true)
            case .stopping(let generation, next: .suspend):
                if let waiting { entry.waiters.append(waiting) }
                entry.join(expectation, transferRuns: true)
                entry.phase = .stopping(generation, next: .resume)
                actions = [.publish(key, .downloading)]
            case .completed where completedFileIsIntact:
                if priority != 0 { entry.priority = priority }  // for a download that may follow
                actions = entry.askCompleted(key, expectation: expectation, waiting: waiting)
                if entry.phase == .queued { slots.enqueue(key, priority: entry.priority) }
            case .idle, .suspended:
                // Continues with what it kept: its partial file, its options, its expectations.
                entry.phase = .queued
                entry.join(expectation, transferRuns: false)
                if priority != 0 { entry.priority = priority }
                entry.waiters += waiting.map { [$0] } ?? []
                slots.enqueue(key, priority: entry.priority)
                actions = [.adoptOptions(key, fresh: entries[key] == nil), .publish(key, .queued)]
            case .failed, .completed:
                // A new attempt (a completed file that is gone or changed is fetched again; it is not the download's
                // any more).
                if entry.phase == .completed { actions.append(entry.releaseCompletedFile(key)) }
                entry = entry.newAttempt(expectation: expectation, priority: priority, waiting: waiting)
                slots.enqueue(key, priority: entry.priority)
                actions += [.adoptOptions(key, fresh: false), .publish(key, .queued)]
            }
            entries[key] = entry
            schedule(&actions)
            return actions
        }

        /// A request that cannot be carried out at all (a malformed URL): the download fails at once.
        mutating func reject(_ key: Key, error: DownloadError, waiter: WaiterID?) -> [Action] {
            let fresh = entries[key] == nil
            var entry = entries[key] ?? Entry()
            switch entry.phase {
            case .queued, .running, .stopping, .completed: return waiter.map { [.fail([$0], key, .error(error))] } ?? []
            case .idle, .suspended, .failed:
                entry.phase = .failed
                entry.error = error
                entries[key] = entry
                return [
                    .adoptOptions(key, fresh: fresh), .recordFailure(key, error), .publish(key, .failed),
                ]
                    + (waiter.map { [.fail([$0], key, .error(error))] } ?? [])
            }
        }

        /// Continues a suspended or failed download with its own options.
        mutating func resume(_ key: Key) -> [Action] {
            if entries[key]?.inspection != nil {
                entries[key]?.held.append(.resume)
                return []
            }
            guard !isShuttingDown, var entry = entries[key], !entry.isRemoved else { return [] }
            var actions: [Action] = []
            entry.pausedWhileVerifying = false
            switch entry.phase {
            case .idle, .suspended, .failed:
                entry.phase = .queued
                slots.enqueue(key, priority: entry.priority)
                actions = [.publish(key, .queued)]
            case .stopping(let generation, next: .suspend):
                entry.phase = .stopping(generation, next: .resume)
                actions = [.publish(key, .downloading)]
            case .completed:
                actions = entry.startWaitingVerifications(key)
            case .queued, .running, .stopping(_, next: .resume):
                return []
            }
            entries[key] = entry
            schedule(&actions)
            return actions
        }

        /// Pauses a download. A waiting one leaves the queue and its waiters are answered now; a running one is told
        /// to stop and its waiters are answered when it has (it may still complete).
        mutating func suspend(_ key: Key) -> [Action] {
            if entries[key]?.inspection != nil {
                entries[key]?.held.append(.suspend)
                return []
            }
            guard var entry = entries[key], !entry.isRemoved else { return [] }
            if entry.phase == .queued { slots.dequeue(key) }
            let actions = entry.suspend(key)
            entries[key] = entry  // no scheduling here: a stopping transfer keeps its slot
            return actions
        }

        /// Drops a download: its waiters are answered now, its receipt goes, and its files go once no transfer
        /// touches them any more.
        /// - Parameter keepingCompletedFile: leave the completed file on disk (`forget`): it is released first, so only
        ///   the partial file and the file of a replacement still running are deleted.
        mutating func remove(_ key: Key, keepingCompletedFile: Bool = false) -> [Action] {
            // Taken out (one look-up, the entry moved, not copied) and put back only where it stays: three look-ups
            // and two copies of the entry before, for every file a batch forgets (issue #52).
            guard var entry = entries.removeValue(forKey: key) else { return [] }
            if entry.inspection != nil {
                entry.held.append(.remove(keepingCompletedFile: keepingCompletedFile))
                entries[key] = entry
                return []
            }
            guard !entry.isRemoved else {
                entries[key] = entry
                return []
            }
            let everyone = entry.waiters.map(\.id) + entry.verifying.flatMap(\.waiters)
            var keepsPlacedFile = false
            if case .completed = entry.phase, keepingCompletedFile, !entry.replacesCompletedFile {
                keepsPlacedFile = true
            }
            var actions: [Action] = keepingCompletedFile ? [entry.releaseCompletedFile(key)] : []
            if !everyone.isEmpty { actions.append(.fail(everyone, key, .removed)) }
            actions.append(.forget(key, keepsPlacedFile: keepsPlacedFile))
            switch entry.phase {
            case .running(let generation), .stopping(let generation, _):
                if case .running = entry.phase { actions.append(.cancel(key, generation)) }
                entry.phase = .stopping(generation, next: .suspend)
                entry.waiters = []
                entry.verifying = []
                entry.isRemoved = true
                entry.discardsFiles = true
                entries[key] = entry
            case .completed where keepingCompletedFile && !entry.replacesCompletedFile:
                // Forgotten with its file kept: its partial file became that file and its state was deleted then, so
                // there is nothing to delete (two system calls and a hop to the file queue a file, issue #52; what a
                // crash left is swept when a manager opens the folder).
                break
            case .queued, .idle, .suspended, .failed, .completed:
                slots.dequeue(key)
                actions.append(.discardFiles(key, producedBy: nil, completedFile: entry.completedFile?.url))
            }
            return actions
        }

        /// A waiter gave up (its task was cancelled). If nobody else waits, a waiting or running download is
        /// suspended.
        mutating func cancelWaiter(_ id: WaiterID, of key: Key) -> [Action] {
            guard var entry = entries[key] else { return [] }
            if let index = entry.waiters.firstIndex(where: { $0.id == id }) {
                entry.waiters.remove(at: index)
            } else if let index = entry.verifying.firstIndex(where: { $0.waiters.contains(id) }) {
                entry.verifying[index].waiters.removeAll { $0 == id }
            } else if entry.forgetHeldWaiter(id) {
                entries[key] = entry
                return [.fail([id], key, .waiterCancelled)]  // a completed download: nothing to suspend
            } else {
                return []
            }
            entries[key] = entry
            var actions: [Action] = [.fail([id], key, .waiterCancelled)]
            if entry.waiters.isEmpty { actions += suspend(key) }
            return actions
        }

        /// The owner is about to carry out `actions`: the batches' waiters they answer are answered, and the downloads
        /// they are told completed are to be forgotten (`forgetAnsweredDownloads()`).
        mutating func carryingOut(_ actions: [Action]) {
            guard !forgettingWaiters.isEmpty else { return }
            // By index: the element is matched where it is, not copied whole (with its references) and destroyed.
            for index in actions.indices {
                switch actions[index] {
                case .succeed(let ids, let key):
                    let answered = ids.filter { forgettingWaiters.remove($0) != nil }
                    if !answered.isEmpty { completedForBatches.append(key) }
                case .fail(let ids, _, _):
                    for id in ids { forgettingWaiters.remove(id) }
                default:
                    continue
                }
            }
        }

        /// Forgets, keeping their files, the downloads batches were told completed (`carryingOut`), unless they are
        /// not settled any more: asked again, or being verified or looked at for someone. The owner asks once the
        /// actions of an event are carried out, so that none of them finds its download gone.
        mutating func forgetAnsweredDownloads() -> [Action] {
            var actions: [Action] = []
            while let key = completedForBatches.popLast() {
                if isSettled(key) { actions += remove(key, keepingCompletedFile: true) }
            }
            return actions
        }

        /// Changes how many transfers may run at once. Lowering it stops nothing: fewer start from now on.
        mutating func setLimit(_ newLimit: Int) -> [Action] {
            slots.setLimit(newLimit)
            var actions: [Action] = []
            schedule(&actions)
            return actions
        }
    }
}

// Events from transfers, the shutdown, and the scheduling every event ends with.
extension DownloadManager.StateMachine {
    /// A transfer generation has ended; stale generations are ignored.
    /// - Parameter produced: the verified file a completed generation produced (`.complete` makes it the download's,
    ///   `.discardFiles` deletes it).
    mutating func transferEnded(
        _ key: Key, generation: Generation, _ end: TransferEnd, produced: CompletedFile? = nil
    ) -> [Action] {
        guard var entry = entries[key] else { return [] }
        var actions: [Action] = []
        switch entry.phase {
        case .running(generation):
            slots.release()
            finish(key, &entry, generation: generation, end, next: nil, produced: produced, &actions)
        case .stopping(generation, let next):
            slots.release()
            if entry.discardsFiles {
                actions.append(.discardFiles(key, producedBy: generation, completedFile: entry.completedFile?.url))
                entry.completedFile = nil
                if entry.isRemoved {
                    entries[key] = nil
                    schedule(&actions)
                    return actions
                }
                // Removed and requested again: the new download starts from nothing.
                entry.discardsFiles = false
                entry.replacesCompletedFile = false
                entry.checksum = nil
                finish(key, &entry, generation: generation, .cancelled, next: next, produced: nil, &actions)
            } else {
                finish(key, &entry, generation: generation, end, next: next, produced: produced, &actions)
            }
        default:
            return []
        }
        entries[key] = entry
        schedule(&actions)
        return actions
    }

    /// The completed file was hashed for waiters' expectation; `actual` is `nil` when it could not be read.
    mutating func verified(_ key: Key, expectation: Checksum, actual: Checksum?) -> [Action] {
        guard var entry = entries[key], !entry.isRemoved else { return [] }
        let wasQueued = entry.phase == .queued
        var actions = entry.verified(key, expectation: expectation, actual: actual, shuttingDown: isShuttingDown)
        if !wasQueued && entry.phase == .queued { slots.enqueue(key, priority: entry.priority) }
        entries[key] = entry
        schedule(&actions)
        return actions
    }

    /// A download's `Retry-After` is over (the owner's timer of `.wake`): it takes the first place in the queue.
    mutating func retryDue(_ key: Key) -> [Action] {
        guard var entry = entries[key], !entry.isRemoved, entry.phase == .queued, entry.waitsForRetry else { return [] }
        entry.waitsForRetry = false
        slots.enqueueFirst(key, priority: entry.priority)
        entries[key] = entry
        var actions: [Action] = []
        schedule(&actions)
        return actions
    }

    /// Suspends everything, answers every waiter and starts nothing more; `.shutDownCompleted` follows once
    /// every transfer has ended and every completed file being looked at has been reported (the requests held behind
    /// it are then refused as after the shutdown).
    mutating func shutdown() -> [Action] {
        guard lifecycle == .running else { return [] }
        lifecycle = .shuttingDown
        var actions: [Action] = []
        for key in Array(entries.keys) {
            guard var entry = entries[key] else { continue }
            if entry.phase == .queued { slots.dequeue(key) }
            actions += entry.interrupt(key)
            entries[key] = entry
        }
        schedule(&actions)
        return actions
    }

    /// Settles a download whose transfer ended; `next` is what was asked while it stopped (`nil`: nothing). Resumed
    /// while it stopped, it continues in the same slot with a new generation.
    private mutating func finish(
        _ key: Key, _ entry: inout Entry, generation: Generation, _ end: TransferEnd, next: Next?,
        produced: CompletedFile?, _ actions: inout [Action]
    ) {
        // A generation told to stop that ends to wait for a retry has stopped as asked.
        var end = end
        if next != nil, case .retryLater = end { end = .cancelled }
        if isShuttingDown, case .retryLater = end { end = .cancelled }
        guard end == .cancelled, next == .resume, !isShuttingDown else {
            actions += entry.settle(
                key, generation: generation, end, produced: produced, shuttingDown: isShuttingDown)
            return
        }
        actions += start(key, &entry)
    }

    /// Starts a transfer of `key` in a slot taken now.
    private mutating func start(_ key: Key, _ entry: inout Entry) -> [Action] {
        let generation = slots.take()
        entry.phase = .running(generation)
        let start = Start(
            expectation: entry.expectationForStart(), replacesCompletedFile: entry.replacesCompletedFile,
            retriesMade: entry.retriesMade)
        entry.retriesMade = 0
        return [.start(key, generation, start), .publish(key, .downloading)]
    }

    /// Starts waiting downloads while slots are free; once shutting down, reports when the last slot is free.
    private mutating func schedule(_ actions: inout [Action]) {
        guard lifecycle == .running else {
            if lifecycle == .shuttingDown && slots.inUse == 0 && inspections == 0 {
                lifecycle = .shutDown
                actions.append(.shutDownCompleted)
            }
            return
        }
        while let key = slots.nextWaiting() {
            guard var entry = entries[key], entry.phase == .queued else { continue }
            actions += start(key, &entry)
            entries[key] = entry
        }
    }
}
