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

        // The state below is changed only by this type's `mutating` methods (here and in its extensions in
        // DownloadManager+StateMachine+*.swift); it is internal only because Swift has no access level between a file
        // and the module, and `.ci/layers` fails when any other file touches it.

        /// Whether the manager accepts work.
        enum Lifecycle {
            case running, shuttingDown, shutDown
        }

        var entries: [Key: Entry] = [:]
        var queue: WaitingQueue<Key>
        /// How many slots may be in use.
        private(set) var limit: Int
        /// Slots held by running and stopping transfers.
        var slotsInUse = 0
        var nextGeneration: Generation = 0
        var lifecycle = Lifecycle.running

        /// Whether `shutdown()` was called.
        var isShuttingDown: Bool { lifecycle != .running }
        /// Whether `shutdown()` was called and every transfer has ended since (`.shutDownCompleted` was returned).
        var hasShutDown: Bool { lifecycle == .shutDown }

        init(limit: Int, prioritization: DownloadPrioritization) {
            self.limit = max(1, limit)
            queue = WaitingQueue(prioritization: prioritization)
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
            return Self.state(entry.phase)
        }

        /// Whether `key` is completed with nobody waiting and nothing being verified: forgetting it ends nothing.
        func isSettled(_ key: Key) -> Bool {
            guard let entry = entries[key], !entry.isRemoved, entry.phase == .completed else { return false }
            return entry.waiters.isEmpty && entry.verifying.isEmpty
        }

        /// Whether a completed file of `key` is on disk and belongs to it.
        func hasCompletedFile(_ key: Key) -> Bool {
            entries[key]?.hasCompletedFile ?? false
        }

        /// Whether `generation` is the live transfer of `key` (running, not told to stop).
        func isRunning(_ key: Key, generation: Generation) -> Bool {
            entries[key]?.phase == .running(generation)
        }

        /// How many downloads wait for a slot.
        var queuedCount: Int { queue.count }

        static func state(_ phase: Phase) -> DownloadState {
            switch phase {
            case .idle: return .idle
            case .queued: return .queued
            case .running, .stopping(_, next: .resume): return .downloading
            case .stopping(_, next: .suspend), .suspended: return .suspended
            case .completed: return .completed
            case .failed: return .failed
            }
        }

        // MARK: - Events from callers

        /// The expected checksums a download keeps, for saving.
        func expectations(of key: Key) -> KeptExpectations {
            guard let entry = entries[key] else { return .none }
            return KeptExpectations(own: entry.expectation, others: entry.otherExpectations)
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
            var entry = Entry()
            entry.priority = priority
            entry.interrupted = interrupted
            entry.expectation = expectations.own
            entry.otherExpectations = expectations.others
            if replacesCompletedFile && state != .completed {
                entry.phase = .suspended
                entry.hasCompletedFile = true
                entry.replacesCompletedFile = true
                entry.checksum = checksum
                entries[key] = entry
                return
            }
            switch state {
            case .idle: entry.phase = .idle
            case .queued, .downloading:
                entry.phase = .suspended  // interrupted: not running any more
                entry.interrupted = true
            case .suspended: entry.phase = .suspended
            case .completed:
                entry.phase = .completed
                entry.hasCompletedFile = true
                entry.checksum = checksum
                // Compared again when the download is next asked for or resumed; a mismatch is then a warning
                // (nothing downloads on its own after a restart).
                entry.verifying = entry.otherExpectations.map { ($0, [], false) }
                entry.verificationsWait = !entry.verifying.isEmpty
            case .failed: entry.phase = .failed
            }
            entries[key] = entry
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
        mutating func request(
            _ key: Key, expectation: Checksum?, priority: Int = 0, waiter: WaiterID?, completedFileIsIntact: Bool
        ) -> [Action] {
            let waiting = waiter.map { Waiter(id: $0, expectation: expectation) }
            if isShuttingDown { return waiting.map { [.fail([$0.id], key, .shutDown)] } ?? [] }
            var entry = entries[key] ?? Entry()
            var actions: [Action] = []
            entry.pausedWhileVerifying = false  // a request lifts a caller's pause, as it resumes a suspended download
            if let expectation, entry.keepsItsExpectations, let kept = entry.contradiction(to: expectation) {
                let refusal = Failure.conflict(kept: kept, requested: expectation)
                return waiting.map { [.fail([$0.id], key, refusal)] } ?? [.warn(key, refusal)]
            }
            switch entry.phase {
            case .stopping(let generation, _) where entry.isRemoved:
                // Removed a moment ago and wanted again: a new download, once the old files are gone.
                let hadCompletedFile = entry.hasCompletedFile
                entry = Entry(phase: .stopping(generation, next: .resume), priority: priority, expectation: expectation)
                entry.hasCompletedFile = hadCompletedFile
                entry.discardsFiles = true
                entry.waiters = waiting.map { [$0] } ?? []
                actions = [.adoptOptions(key, fresh: true), .publish(key, .downloading)]
            case .queued:
                if let waiting { entry.waiters.append(waiting) }
                entry.join(expectation, transferRuns: false)
                if priority > entry.priority {
                    entry.priority = priority
                    queue.push(key, priority: priority)
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
                actions = entry.startWaitingVerifications(key)
                if let expectation, let checksum = entry.checksum, checksum.algorithm == expectation.algorithm,
                    checksum != expectation
                {
                    // The server may have a new version: fetch it, and keep the old file unless the new one matches.
                    if let waiting { entry.waiters.append(waiting) }
                    enqueueReplacement(key, &entry, expectation: expectation, priority: entry.priority, &actions)
                } else if let expectation, entry.checksum?.algorithm != expectation.algorithm {
                    if let index = entry.verifying.firstIndex(where: { $0.expectation == expectation && $0.redownload })
                    {
                        if let waiting { entry.verifying[index].waiters.append(waiting.id) }
                    } else {
                        entry.verifying.append((expectation, waiting.map { [$0.id] } ?? [], true))
                        // Kept until it is answered, so that a restart meanwhile verifies it again.
                        if !entry.otherExpectations.contains(expectation) {
                            entry.otherExpectations.append(expectation)
                        }
                        actions.append(.verify(key, expectation))
                    }
                } else if let waiting {
                    actions.append(.succeed([waiting.id], key))
                }
            case .idle, .suspended:
                // Continues with what it kept: its partial file, its options, its expectations.
                entry.phase = .queued
                entry.join(expectation, transferRuns: false)
                if priority != 0 { entry.priority = priority }
                entry.waiters += waiting.map { [$0] } ?? []
                queue.push(key, priority: entry.priority)
                actions = [.adoptOptions(key, fresh: entries[key] == nil), .publish(key, .queued)]
            case .failed, .completed:
                // A new attempt (a completed file that is gone is fetched again).
                let earlier = entry
                entry = Entry(phase: .queued, priority: priority != 0 ? priority : earlier.priority)
                if let expectation {
                    entry.expectation = expectation  // the earlier ones were answered by the end of that attempt
                } else {
                    entry.expectation = earlier.expectation
                    entry.otherExpectations = earlier.otherExpectations
                }
                entry.verifying = earlier.verifying
                entry.waiters = earlier.waiters + (waiting.map { [$0] } ?? [])
                queue.push(key, priority: entry.priority)
                actions = [.adoptOptions(key, fresh: false), .publish(key, .queued)]
            }
            entries[key] = entry
            schedule(&actions)
            return actions
        }

        /// A request that cannot be carried out at all (a malformed URL): the download fails at once.
        mutating func reject(_ key: Key, error: DownloadError, waiter: WaiterID?) -> [Action] {
            var entry = entries[key] ?? Entry()
            switch entry.phase {
            case .queued, .running, .stopping, .completed: return waiter.map { [.fail([$0], key, .error(error))] } ?? []
            case .idle, .suspended, .failed:
                entry.phase = .failed
                entry.error = error
                entries[key] = entry
                return [
                    .adoptOptions(key, fresh: entries[key] == nil), .recordFailure(key, error), .publish(key, .failed),
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
                queue.push(key, priority: entry.priority)
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
            defer { entries[key] = entry }  // no scheduling here: a stopping transfer keeps its slot
            if entry.interrupted && entry.phase == .suspended {
                entry.interrupted = false  // a caller's pause now: it stays paused after a restart
                return [.publish(key, .suspended)]
            }
            entry.interrupted = false
            switch entry.phase {
            case .queued:
                queue.remove(key)
                entry.phase = .suspended
                let waiters = entry.waiters.map(\.id)
                entry.waiters = []
                return [.publish(key, .suspended)] + (waiters.isEmpty ? [] : [.fail(waiters, key, .suspended)])
            case .running(let generation):
                entry.phase = .stopping(generation, next: .suspend)
                return [.cancel(key, generation), .publish(key, .suspended)]
            case .stopping(let generation, next: .resume):
                entry.phase = .stopping(generation, next: .suspend)
                return [.publish(key, .suspended)]
            case .completed:
                // Its file may be being hashed for a new expectation: what a mismatch would fetch waits for a resume.
                entry.pausedWhileVerifying = !entry.verifying.isEmpty
                return []
            case .idle, .suspended, .failed, .stopping(_, next: .suspend):
                return []
            }
        }

        /// Drops a download: its waiters are answered now, its receipt goes, and its files go once no transfer
        /// touches them any more.
        /// - Parameter keepingCompletedFile: leave the completed file on disk (`forget`): only the partial file and
        ///   the file of a replacement still running are deleted.
        mutating func remove(_ key: Key, keepingCompletedFile: Bool = false) -> [Action] {
            guard var entry = entries[key], !entry.isRemoved else { return [] }
            if keepingCompletedFile { entry.hasCompletedFile = false }
            let everyone = entry.waiters.map(\.id) + entry.verifying.flatMap(\.waiters)
            var actions: [Action] = everyone.isEmpty ? [] : [.fail(everyone, key, .removed)]
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
                queue.remove(key)
                entries[key] = nil
                actions.append(.discardFiles(key, producedBy: nil, includingCompletedFile: entry.hasCompletedFile))
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
            limit = max(1, newLimit)
            var actions: [Action] = []
            schedule(&actions)
            return actions
        }
    }
}
