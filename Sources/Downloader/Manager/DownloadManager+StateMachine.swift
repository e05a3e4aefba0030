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

        /// Whether the manager accepts work.
        private enum Lifecycle {
            case running, shuttingDown, shutDown
        }

        // The machine's state: private, changed only by the events below. The entries' own rules are in
        // DownloadManager+StateMachine+Entry*.swift, the slots and the queue in DownloadManager+StateMachine+Slots.swift.
        private var entries: [Key: Entry] = [:]
        private var slots: Slots
        private var lifecycle = Lifecycle.running

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

        /// Whether `key` is completed with nobody waiting and nothing being verified: forgetting it ends nothing.
        func isSettled(_ key: Key) -> Bool {
            guard let entry = entries[key], !entry.isRemoved, entry.phase == .completed else { return false }
            return entry.waiters.isEmpty && entry.verifying.isEmpty
        }

        /// Whether `generation` is the live transfer of `key` (running, not told to stop).
        func isRunning(_ key: Key, generation: Generation) -> Bool {
            entries[key]?.phase == .running(generation)
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
        mutating func restore(
            _ key: Key, state: DownloadState, checksum: Checksum?, expectations: KeptExpectations = .none,
            priority: Int = 0,
            replacesCompletedFile: Bool = false, interrupted: Bool = false
        ) {
            entries[key] = Entry(
                restoring: state, checksum: checksum, expectations: expectations, priority: priority,
                replacesCompletedFile: replacesCompletedFile, interrupted: interrupted)
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
        /// - Parameters:
        ///   - expectation: the checksum the caller expects, if any.
        ///   - priority: higher starts first among waiting downloads.
        ///   - waiter: who to answer, if anyone waits.
        ///   - completedFileIsIntact: for a completed download, whether its file is still there as recorded.
        ///   - contradiction: what the request's options contradict in the download's own (another destination or
        ///     file name), if anything: a download that is waiting or running refuses it (one that rests takes the
        ///     request's options instead, and a completed one moves its file).
        mutating func request(
            _ key: Key, expectation: Checksum?, priority: Int = 0, waiter: WaiterID?, completedFileIsIntact: Bool,
            contradiction: String? = nil
        ) -> [Action] {
            let waiting = waiter.map { Waiter(id: $0, expectation: expectation) }
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
                entry = Entry(phase: .stopping(generation, next: .resume), priority: priority, expectation: expectation)
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
                if entry.phase == .completed { actions.append(.releaseCompletedFile(key)) }
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
            guard var entry = entries[key], !entry.isRemoved else { return [] }
            let everyone = entry.waiters.map(\.id) + entry.verifying.flatMap(\.waiters)
            var actions: [Action] = keepingCompletedFile ? [.releaseCompletedFile(key)] : []
            if !everyone.isEmpty { actions.append(.fail(everyone, key, .removed)) }
            actions.append(.forget(key))
            switch entry.phase {
            case .running(let generation), .stopping(let generation, _):
                if case .running = entry.phase { actions.append(.cancel(key, generation)) }
                entry.phase = .stopping(generation, next: .suspend)
                entry.waiters = []
                entry.verifying = []
                entry.isRemoved = true
                entry.discardsFiles = true
                entries[key] = entry
            case .queued, .idle, .suspended, .failed, .completed:
                slots.dequeue(key)
                entries[key] = nil
                actions.append(.discardFiles(key, producedBy: nil))
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
            } else {
                return []
            }
            entries[key] = entry
            var actions: [Action] = [.fail([id], key, .waiterCancelled)]
            if entry.waiters.isEmpty { actions += suspend(key) }
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
    mutating func transferEnded(_ key: Key, generation: Generation, _ end: TransferEnd) -> [Action] {
        guard var entry = entries[key] else { return [] }
        var actions: [Action] = []
        switch entry.phase {
        case .running(generation):
            slots.release()
            finish(key, &entry, generation: generation, end, next: nil, &actions)
        case .stopping(generation, let next):
            slots.release()
            if entry.discardsFiles {
                actions.append(.discardFiles(key, producedBy: generation))
                if entry.isRemoved {
                    entries[key] = nil
                    schedule(&actions)
                    return actions
                }
                // Removed and requested again: the new download starts from nothing.
                entry.discardsFiles = false
                entry.replacesCompletedFile = false
                entry.checksum = nil
                finish(key, &entry, generation: generation, .cancelled, next: next, &actions)
            } else {
                finish(key, &entry, generation: generation, end, next: next, &actions)
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
    /// every transfer has ended.
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
        _ actions: inout [Action]
    ) {
        // A generation told to stop that ends to wait for a retry has stopped as asked.
        var end = end
        if next != nil, case .retryLater = end { end = .cancelled }
        if isShuttingDown, case .retryLater = end { end = .cancelled }
        guard end == .cancelled, next == .resume, !isShuttingDown else {
            actions += entry.settle(key, generation: generation, end, shuttingDown: isShuttingDown)
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
            if lifecycle == .shuttingDown && slots.inUse == 0 {
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

// The words of the lifecycle state machine: phases, how transfers end, why waiters fail, and the actions it returns.
extension DownloadManager.StateMachine {
    /// A caller waiting for a download, with the checksum it expects, if any.
    struct Waiter: Equatable {
        let id: WaiterID
        let expectation: Checksum?
    }

    /// What happens once a stopping transfer has ended.
    enum Next: Equatable {
        case suspend
        /// Continue in the same slot: a new generation resumes from the partial file.
        case resume
    }

    /// Where one download is in its life.
    enum Phase: Equatable {
        /// Known, never started (receipts of an older version).
        case idle
        /// Waiting for a slot.
        case queued
        /// A transfer runs.
        case running(Generation)
        /// A transfer was told to stop and still holds its slot.
        case stopping(Generation, next: Next)
        case suspended
        case completed
        case failed

        /// The public state of a download in this phase.
        var state: DownloadState {
            switch self {
            case .idle: return .idle
            case .queued: return .queued
            case .running, .stopping(_, next: .resume): return .downloading
            case .stopping(_, next: .suspend), .suspended: return .suspended
            case .completed: return .completed
            case .failed: return .failed
            }
        }
    }

    /// How a transfer generation ended.
    enum TransferEnd: Equatable {
        /// Whole and verified against its own expectation; the checksum it computed (`nil` with hashing off).
        case completed(Checksum?)
        case failed(DownloadError)
        /// Stopped from outside: the partial file is kept.
        case cancelled
        /// The server asked to wait (`Retry-After`) before the next attempt: the download waits for it out of its
        /// slot (another download takes the slot meanwhile), then first in the queue; `retriesMade` retries of the
        /// download's limit are spent, the one this wait leads to included.
        case retryLater(after: Double, retriesMade: Int)
    }

    /// Why a waiter is answered with an error.
    enum Failure: Equatable {
        case error(DownloadError)
        case suspended
        case removed
        /// The manager shut down while the waiter waited.
        case shutDown
        /// The request came after the shutdown began: nothing was started for it.
        case afterShutdown
        /// The waiter's own task was cancelled.
        case waiterCancelled
        case mismatch(expected: Checksum, actual: Checksum)
        /// The request's expectation contradicts one the download keeps (the same algorithm, another digest).
        case conflict(kept: Checksum, requested: Checksum)
        /// The request's destination or file name contradicts the one of the download it would join (the reason).
        case conflictingOptions(String)
    }

    /// How a transfer starts.
    struct Start: Equatable {
        /// What the transfer verifies the file against (the caller's; a server's digest is the transfer's own).
        var expectation: Checksum?
        /// The download's completed file is replaced once the new one is verified (a caller expected another
        /// checksum); until then it stays.
        var replacesCompletedFile: Bool
        /// Retries of the download's limit already spent (by a generation that ended to wait out a `Retry-After`).
        var retriesMade = 0
    }

    /// What the owner carries out, in order.
    enum Action: Equatable {
        /// The options of the request just made become the download's: all of them for a new download (`fresh`),
        /// else the ones the request sets, merged into those the download keeps.
        case adoptOptions(Key, fresh: Bool)
        /// Nobody waits to be told this: say it as a warning.
        case warn(Key, Failure)
        /// The download's public state is now this (tell listeners, save).
        case publish(Key, DownloadState)
        /// The download failed with this error (kept in the receipt).
        case recordFailure(Key, DownloadError)
        case start(Key, Generation, Start)
        case cancel(Key, Generation)
        /// The file produced by this generation is the download's completed file.
        case complete(Key, Generation)
        case succeed([WaiterID], Key)
        case fail([WaiterID], Key, Failure)
        /// Hash the completed file with the expectation's algorithm and report `verified`.
        case verify(Key, Checksum)
        /// Delete the partial file and its state, the file that generation produced (if any) and the download's
        /// completed file (if it still has one).
        case discardFiles(Key, producedBy: Generation?)
        /// The completed file is not the download's any more (forgotten, or gone or changed and fetched again): it stays
        /// where it is, the user's, and nothing deletes it. Where the completed file is (and whether there is one) is
        /// the owner's to know; the machine decides only when it stops being the download's.
        case releaseCompletedFile(Key)
        /// The download is gone: drop its receipt.
        case forget(Key)
        /// Shutdown asked and every transfer has ended.
        case shutDownCompleted
        /// Call `retryDue(key)` after this many seconds: the download waits out a `Retry-After` without a slot.
        case wake(Key, after: Double)
    }
}

extension DownloadManager.StateMachine {
    /// The manager's slots: how many transfers may run at once, how many hold one, the downloads waiting for one,
    /// and the numbers of transfer generations. Part of the machine's state, changed only through these methods.
    struct Slots {
        private var queue: WaitingQueue<Key>
        /// How many slots may be in use.
        private(set) var limit: Int
        /// Slots held by running and stopping transfers.
        private(set) var inUse = 0
        private var lastGeneration: Generation = 0

        init(limit: Int, prioritization: DownloadPrioritization) {
            self.limit = max(1, limit)
            queue = WaitingQueue(prioritization: prioritization)
        }

        /// Changes how many slots may be in use (at least one).
        mutating func setLimit(_ newLimit: Int) {
            limit = max(1, newLimit)
        }

        /// Queues `key` for a slot (again, if it waits already: it takes a new place).
        mutating func enqueue(_ key: Key, priority: Int) {
            queue.push(key, priority: priority)
        }

        /// Queues `key` before the downloads of its priority that wait (one that had started and waited out a
        /// `Retry-After`).
        mutating func enqueueFirst(_ key: Key, priority: Int) {
            queue.pushFirst(key, priority: priority)
        }

        /// Takes `key` out of the queue, if it waits.
        mutating func dequeue(_ key: Key) {
            queue.remove(key)
        }

        /// The download that starts next, when a slot is free.
        mutating func nextWaiting() -> Key? {
            inUse < limit ? queue.popFirst() : nil
        }

        /// Takes a slot for a new transfer generation.
        /// - Returns: the generation's number.
        mutating func take() -> Generation {
            inUse += 1
            lastGeneration += 1
            return lastGeneration
        }

        /// A transfer ended: its slot is free.
        mutating func release() {
            inUse -= 1
        }
    }
}
