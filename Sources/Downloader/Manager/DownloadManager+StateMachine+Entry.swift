// One download's bookkeeping inside the lifecycle state machine, and the rules for the expected checksums it keeps and
// compares with its completed file.
extension DownloadManager.StateMachine {
    /// One download's bookkeeping. Only the machine holds entries (its `entries` are private): it finds one, calls its
    /// methods (below) and stores it again.
    struct Entry {
        var phase: Phase = .idle
        var waiters: [Waiter] = []
        /// Waiters of a completed download whose file is being hashed for their expectation; after a mismatch
        /// the file is downloaded again when `redownload` (a new request), else they fail (they had joined).
        var verifying: [(expectation: Checksum, waiters: [WaiterID], redownload: Bool)] = []
        var priority = 0
        /// What the current or next transfer verifies against: the download's own expected checksum, saved
        /// with it and kept across restarts.
        var expectation: Checksum?
        /// Expected checksums that requests added beside the download's own (another algorithm, or a request that
        /// joined a running transfer; saved too): compared with the file once it is complete, each reported to its
        /// waiters or, with none, as a warning.
        var otherExpectations: [Checksum] = []
        /// The download's own expectation and the others, as they are saved and shown.
        var keptExpectations: KeptExpectations {
            KeptExpectations(own: expectation, others: otherExpectations)
        }
        /// The checksum of the completed file, when known.
        var checksum: Checksum?
        /// Where the verified file is and how long it is, while the download has one (`completedFile(of:)`).
        var completedFile: CompletedFile?
        /// The running transfer replaces the completed file once verified.
        var replacesCompletedFile = false
        /// Removed while its transfer stops: hidden, forgotten once the transfer ended and its files are gone.
        var isRemoved = false
        /// The stopping generation's files go before anything else (removed, then requested again).
        var discardsFiles = false
        /// Why the download failed, while it is `.failed`.
        var error: DownloadError?
        /// `verifying` holds verifications asked before a restart, to start when the download is next asked for.
        var verificationsWait = false
        /// Suspended (or stopping to be) because its process stops or stopped, not by a caller (see
        /// `isInterrupted(_:)`); cleared by `suspend`.
        var interrupted = false
        /// Queued but out of the slots' queue until `retryDue`: it waits out the server's `Retry-After`.
        var waitsForRetry = false
        /// Retries spent by the generation that ended to wait (`TransferEnd.retryLater`), for the next one to go on
        /// counting from.
        var retriesMade = 0
        /// A caller suspended it while its completed file was hashed for a new expectation: a mismatch then leaves the
        /// newer version suspended instead of fetching it. Cleared by a request or `resume`.
        var pausedWhileVerifying = false
        /// The request for which the owner looks at the completed file (`.inspectCompletedFile`), until it reports.
        var inspection: HeldRequest?
        /// What came for the download meanwhile, in order: it follows the inspection.
        var held: [HeldEvent] = []

        /// Whether a request continues this download as it is (it is waiting, running or suspended), rather than
        /// starting a new attempt (completed, failed, removed).
        var keepsItsExpectations: Bool {
            if isRemoved { return false }
            switch phase {
            case .completed, .failed: return false
            case .idle, .queued, .running, .stopping, .suspended: return true
            }
        }

        /// Whether a request joins this download with the options it has (it waits for a slot, runs, or stops with a
        /// transfer of those options), rather than giving it the request's options (it rests) or moving its file.
        var isUnderway: Bool {
            if isRemoved { return false }
            switch phase {
            case .queued, .running, .stopping: return true
            case .idle, .suspended, .completed, .failed: return false
            }
        }

        /// The download's own expectation, when `expectation` contradicts it: the same algorithm, another digest.
        /// (The others are compared with the completed file one by one, so they need not agree.)
        func contradiction(to expectation: Checksum) -> Checksum? {
            guard let own = self.expectation, own.algorithm == expectation.algorithm, own != expectation else {
                return nil
            }
            return own
        }

        /// A request's expectation joins the download's: as its own when it has none and no transfer runs (the
        /// next one verifies it), else beside it, compared with the completed file.
        mutating func join(_ expectation: Checksum?, transferRuns: Bool) {
            guard let expectation, self.expectation != expectation, !otherExpectations.contains(expectation)
            else { return }
            if self.expectation == nil && !transferRuns {
                self.expectation = expectation
            } else {
                otherExpectations.append(expectation)
            }
        }

        /// The completed file stops being the download's (forgotten, or gone and fetched again): it stays where it is.
        mutating func releaseCompletedFile(_ key: Key) -> Action {
            defer { completedFile = nil }
            return .releaseCompletedFile(key, file: completedFile?.url)
        }

        /// A held request's waiter gave up: the request goes on without one. Returns whether it was one.
        mutating func forgetHeldWaiter(_ id: WaiterID) -> Bool {
            if inspection?.waiter == id {
                inspection?.waiter = nil
                return true
            }
            for index in held.indices {
                guard case .request(var request) = held[index], request.waiter == id else { continue }
                request.waiter = nil
                held[index] = .request(request)
                return true
            }
            return false
        }

        /// Starts the verifications restored from before a restart, once.
        mutating func startWaitingVerifications(_ key: Key) -> [Action] {
            guard verificationsWait else { return [] }
            verificationsWait = false
            return verifying.map { .verify(key, $0.expectation) }
        }

        /// What a transfer that starts now verifies: the download's own expectation, or, when it has none, the
        /// first of the others, which becomes its own.
        mutating func expectationForStart() -> Checksum? {
            if expectation == nil && !otherExpectations.isEmpty { expectation = otherExpectations.removeFirst() }
            return expectation
        }
        /// Answers the waiters of a completed download, each against its own expectation, and compares the
        /// expectations nobody waits for any more.
        mutating func answerWaiters(_ key: Key, checksum: Checksum?) -> [Action] {
            var actions: [Action] = []
            let answered = Set(waiters.compactMap(\.expectation))
            var succeeded: [WaiterID] = []
            for waiter in waiters {
                guard let expectation = waiter.expectation else {
                    succeeded.append(waiter.id)
                    continue
                }
                if let checksum, checksum.algorithm == expectation.algorithm {
                    if checksum == expectation {
                        succeeded.append(waiter.id)
                    } else {
                        actions.append(.fail([waiter.id], key, .mismatch(expected: expectation, actual: checksum)))
                    }
                } else if let index = verifying.firstIndex(where: { $0.expectation == expectation }) {
                    verifying[index].waiters.append(waiter.id)
                } else {
                    verifying.append((expectation, [waiter.id], false))
                    actions.append(.verify(key, expectation))
                }
            }
            waiters = []
            if !succeeded.isEmpty { actions.append(.succeed(succeeded, key)) }
            // The expectations nobody waits for any more (their caller went, or the process restarted): compared too,
            // and a mismatch is said as a warning. One that needs the file hashed again stays kept until it is
            // answered (`verified`), so that a shutdown meanwhile does not lose it.
            var kept: [Checksum] = []
            for expectation in otherExpectations {
                if let checksum, checksum.algorithm == expectation.algorithm {
                    if checksum != expectation && !answered.contains(expectation) {
                        actions.append(.warn(key, .mismatch(expected: expectation, actual: checksum)))
                    }
                    continue
                }
                kept.append(expectation)
                if !verifying.contains(where: { $0.expectation == expectation }) {
                    verifying.append((expectation, [], false))
                    actions.append(.verify(key, expectation))
                }
            }
            otherExpectations = kept
            return actions
        }

        /// The completed file was hashed for `expectation` (`StateMachine.verified`); `actual` is `nil` when it could
        /// not be read. A mismatch that a new request asked about queues the newer version (the machine queues it).
        mutating func verified(_ key: Key, expectation: Checksum, actual: Checksum?, shuttingDown: Bool) -> [Action] {
            guard let index = verifying.firstIndex(where: { $0.expectation == expectation }) else { return [] }
            let pending = verifying.remove(at: index)
            switch phase {
            case .queued, .running, .stopping:
                // Another request started a new transfer meanwhile: its result answers them.
                waiters += pending.waiters.map { Waiter(id: $0, expectation: expectation) }
                return []
            case .suspended, .idle:
                return pending.waiters.isEmpty ? [] : [.fail(pending.waiters, key, .suspended)]
            case .failed:
                let error = self.error ?? .fileSystem(nil, reason: "the completed file is gone")
                return pending.waiters.isEmpty ? [] : [.fail(pending.waiters, key, .error(error))]
            case .completed:
                otherExpectations.removeAll { $0 == expectation }  // answered now
            }
            let told = pending.waiters
            if actual == expectation {
                if checksum == nil { checksum = actual }
                return told.isEmpty ? [] : [.succeed(told, key)]
            } else if let actual, !pending.redownload {
                let mismatch = Failure.mismatch(expected: expectation, actual: actual)
                return told.isEmpty ? [.warn(key, mismatch)] : [.fail(told, key, mismatch)]
            } else if shuttingDown {
                return told.isEmpty ? [] : [.fail(told, key, .shutDown)]
            } else if pausedWhileVerifying {
                // The caller paused it while the file was hashed: the newer version waits, suspended, for a resume.
                pausedWhileVerifying = false
                phase = .suspended
                self.expectation = expectation
                otherExpectations.removeAll { $0.algorithm == expectation.algorithm }
                replacesCompletedFile = true
                return [.publish(key, .suspended)] + (told.isEmpty ? [] : [.fail(told, key, .suspended)])
            } else {
                // A new request whose checksum the file does not have (or an unreadable file): fetch it again.
                waiters += told.map { Waiter(id: $0, expectation: expectation) }
                return queueReplacement(key, expectation: expectation, priority: priority)
            }
        }
    }
}

// What one download's entry does on the machine's events. The machine finds the entry, keeps the queue and the slots,
// and stores the entry again; these methods change only the entry and return the actions it needs.
extension DownloadManager.StateMachine.Entry {
    typealias Machine = DownloadManager.StateMachine<Key>

    /// A download known from saved state (see `StateMachine.restore`).
    init(
        restoring state: DownloadState, checksum: Checksum?, expectations: KeptExpectations, priority: Int,
        replacesCompletedFile: Bool, interrupted: Bool
    ) {
        self.init(priority: priority, expectation: expectations.own, otherExpectations: expectations.others)
        self.interrupted = interrupted
        if replacesCompletedFile && state != .completed {
            phase = .suspended
            self.replacesCompletedFile = true
            self.checksum = checksum
            return
        }
        switch state {
        case .idle: phase = .idle
        case .queued, .downloading:
            phase = .suspended  // interrupted: not running any more
            self.interrupted = true
        case .suspended: phase = .suspended
        case .completed:
            phase = .completed
            self.checksum = checksum
            // Compared again when the download is next asked for or resumed; a mismatch is then a warning (nothing
            // downloads on its own after a restart).
            verifying = otherExpectations.map { ($0, [], false) }
            verificationsWait = !verifying.isEmpty
        case .failed: phase = .failed
        }
    }

    /// Whether the download is suspended because its process stopped (a shutdown, a crash), not by `suspend`.
    var isInterrupted: Bool {
        guard !isRemoved, interrupted else { return false }
        switch phase {
        case .suspended, .stopping(_, next: .suspend): return true
        default: return false
        }
    }

    /// A request for a completed download whose file is there (`StateMachine.request`): answered from the file, or,
    /// when it expects a digest the file does not have, the file is hashed or the newer version queued (the machine
    /// queues it).
    mutating func askCompleted(_ key: Key, expectation: Checksum?, waiting: Machine.Waiter?) -> [Machine.Action] {
        var actions = startWaitingVerifications(key)
        if let expectation, let checksum, checksum.algorithm == expectation.algorithm, checksum != expectation {
            // The server may have a new version: fetch it, and keep the old file unless the new one matches.
            if let waiting { waiters.append(waiting) }
            actions += queueReplacement(key, expectation: expectation, priority: priority)
        } else if let expectation, checksum?.algorithm != expectation.algorithm {
            if let index = verifying.firstIndex(where: { $0.expectation == expectation && $0.redownload }) {
                if let waiting { verifying[index].waiters.append(waiting.id) }
            } else {
                verifying.append((expectation, waiting.map { [$0.id] } ?? [], true))
                // Kept until it is answered, so that a restart meanwhile verifies it again.
                if !otherExpectations.contains(expectation) { otherExpectations.append(expectation) }
                actions.append(.verify(key, expectation))
            }
        } else if let waiting {
            actions.append(.succeed([waiting.id], key))
        }
        return actions
    }

    /// A new attempt of a failed download, or of a completed one whose file is gone, queued (by the machine) with the
    /// request's expectation if it gives one, else with the ones this one kept.
    func newAttempt(expectation: Checksum?, priority: Int, waiting: Machine.Waiter?) -> Self {
        var attempt = Self(phase: .queued, priority: priority != 0 ? priority : self.priority)
        if let expectation {
            attempt.expectation = expectation  // the earlier ones were answered by the end of the earlier attempt
        } else {
            attempt.expectation = self.expectation
            attempt.otherExpectations = otherExpectations
        }
        attempt.verifying = verifying
        attempt.waiters = waiters + (waiting.map { [$0] } ?? [])
        return attempt
    }

    /// A caller pauses the download (`StateMachine.suspend`). A waiting one is suspended and its waiters answered now
    /// (the machine takes it out of the queue); a running one is told to stop.
    mutating func suspend(_ key: Key) -> [Machine.Action] {
        if interrupted && phase == .suspended {
            interrupted = false  // a caller's pause now: it stays paused after a restart
            return [.publish(key, .suspended)]
        }
        interrupted = false
        switch phase {
        case .queued:
            phase = .suspended
            waitsForRetry = false
            retriesMade = 0
            let answered = waiters.map(\.id)
            waiters = []
            return [.publish(key, .suspended)] + (answered.isEmpty ? [] : [.fail(answered, key, .suspended)])
        case .running(let generation):
            phase = .stopping(generation, next: .suspend)
            return [.cancel(key, generation), .publish(key, .suspended)]
        case .stopping(let generation, next: .resume):
            phase = .stopping(generation, next: .suspend)
            return [.publish(key, .suspended)]
        case .completed:
            // Its file may be being hashed for a new expectation: what a mismatch would fetch waits for a resume.
            pausedWhileVerifying = !verifying.isEmpty
            return []
        case .idle, .suspended, .failed, .stopping(_, next: .suspend):
            return []
        }
    }

    /// The manager shuts down: every waiter is answered and a waiting or running download is suspended as
    /// interrupted (the machine takes a waiting one out of the queue).
    mutating func interrupt(_ key: Key) -> [Machine.Action] {
        var actions: [Machine.Action] = []
        let verifyingWaiters = verifying.flatMap(\.waiters)
        verifying = []
        if !verifyingWaiters.isEmpty { actions.append(.fail(verifyingWaiters, key, .shutDown)) }
        switch phase {
        case .queued:
            phase = .suspended
            interrupted = true
            waitsForRetry = false
            retriesMade = 0
            actions.append(.publish(key, .suspended))
        case .running(let generation):
            phase = .stopping(generation, next: .suspend)
            interrupted = true
            actions += [.cancel(key, generation), .publish(key, .suspended)]
        case .stopping(let generation, next: .resume):
            phase = .stopping(generation, next: .suspend)
            interrupted = true
            actions.append(.publish(key, .suspended))
        default:
            break
        }
        let answered = waiters.map(\.id)
        waiters = []
        if !answered.isEmpty { actions.append(.fail(answered, key, .shutDown)) }
        return actions
    }

    /// Becomes a queued download of the current version that replaces the completed file only once verified (the
    /// machine queues it).
    mutating func queueReplacement(_ key: Key, expectation: Checksum, priority: Int) -> [Machine.Action] {
        phase = .queued
        self.priority = priority
        self.expectation = expectation
        otherExpectations.removeAll { $0.algorithm == expectation.algorithm }
        replacesCompletedFile = true
        return [.publish(key, .queued)]
    }

    /// Settles the download after its transfer `generation` ended, when it does not continue in its slot.
    /// - Parameter produced: the verified file a completed generation produced.
    mutating func settle(
        _ key: Key, generation: Machine.Generation, _ end: Machine.TransferEnd, produced: Machine.CompletedFile?,
        shuttingDown: Bool
    ) -> [Machine.Action] {
        switch end {
        case .completed(let checksum):
            phase = .completed
            replacesCompletedFile = false
            self.checksum = checksum
            let earlier = completedFile?.url
            if let produced { completedFile = produced }
            let replaced = earlier != nil && earlier != completedFile?.url ? earlier : nil
            return [.complete(key, generation, replaced: replaced), .publish(key, .completed)]
                + answerWaiters(key, checksum: checksum)
        case .failed(let error):
            var actions: [Machine.Action]
            if replacesCompletedFile {
                // The completed file stays the download's: only a verified file replaces it. Said as a warning too,
                // for the requests that asked for it without waiting.
                phase = .completed
                replacesCompletedFile = false
                actions = [.publish(key, .completed), .warn(key, .error(error))]
            } else {
                phase = .failed
                self.error = error
                actions = [.recordFailure(key, error), .publish(key, .failed)]
            }
            let answered = waiters.map(\.id)
            waiters = []
            if !answered.isEmpty { actions.append(.fail(answered, key, .error(error))) }
            return actions
        case .retryLater(let delay, let made):
            // Waits out of its slot, then first in the queue (`retryDue`); its waiters go on waiting.
            phase = .queued
            waitsForRetry = true
            retriesMade = made
            return [.publish(key, .queued), .wake(key, after: delay)]
        case .cancelled:
            phase = .suspended
            let answered = waiters.map(\.id)
            waiters = []
            return [.publish(key, .suspended)]
                + (answered.isEmpty ? [] : [.fail(answered, key, shuttingDown ? .shutDown : .suspended)])
        }
    }
}
