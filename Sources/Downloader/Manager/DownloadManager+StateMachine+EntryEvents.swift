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
    mutating func settle(
        _ key: Key, generation: Machine.Generation, _ end: Machine.TransferEnd, shuttingDown: Bool
    ) -> [Machine.Action] {
        switch end {
        case .completed(let checksum):
            phase = .completed
            replacesCompletedFile = false
            self.checksum = checksum
            return [.complete(key, generation), .publish(key, .completed)] + answerWaiters(key, checksum: checksum)
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
