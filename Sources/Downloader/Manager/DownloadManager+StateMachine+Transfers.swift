// The lifecycle state machine's events from transfers (ended, verified) and the transitions they share with callers'
// events.
extension DownloadManager.StateMachine {
    // MARK: - Events from transfers

    /// A transfer generation has ended; stale generations are ignored.
    mutating func transferEnded(_ key: Key, generation: Generation, _ end: TransferEnd) -> [Action] {
        guard var entry = entries[key] else { return [] }
        var actions: [Action] = []
        switch entry.phase {
        case .running(generation):
            slotsInUse -= 1
            finish(key, &entry, generation: generation, end, next: nil, &actions)
        case .stopping(generation, let next):
            slotsInUse -= 1
            if entry.discardsFiles {
                actions.append(
                    .discardFiles(key, producedBy: generation, includingCompletedFile: entry.hasCompletedFile))
                if entry.isRemoved {
                    entries[key] = nil
                    schedule(&actions)
                    return actions
                }
                // Removed and requested again: the new download starts from nothing.
                entry.discardsFiles = false
                entry.hasCompletedFile = false
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
        guard var entry = entries[key], !entry.isRemoved,
            let index = entry.verifying.firstIndex(where: { $0.expectation == expectation })
        else { return [] }
        let pending = entry.verifying.remove(at: index)
        var actions: [Action] = []
        switch entry.phase {
        case .queued, .running, .stopping:
            // Another request started a new transfer meanwhile: its result answers them.
            entry.waiters += pending.waiters.map { Waiter(id: $0, expectation: expectation) }
            entries[key] = entry
            return []
        case .suspended, .idle:
            entries[key] = entry
            return pending.waiters.isEmpty ? [] : [.fail(pending.waiters, key, .suspended)]
        case .failed:
            entries[key] = entry
            let error = entry.error ?? .fileSystem(nil, reason: "the completed file is gone")
            return pending.waiters.isEmpty ? [] : [.fail(pending.waiters, key, .error(error))]
        case .completed:
            entry.otherExpectations.removeAll { $0 == expectation }  // answered now
        }
        if actual == expectation {
            if entry.checksum == nil { entry.checksum = actual }
            if !pending.waiters.isEmpty { actions = [.succeed(pending.waiters, key)] }
        } else if let actual, !pending.redownload {
            let mismatch = Failure.mismatch(expected: expectation, actual: actual)
            actions = pending.waiters.isEmpty ? [.warn(key, mismatch)] : [.fail(pending.waiters, key, mismatch)]
        } else if isShuttingDown {
            if !pending.waiters.isEmpty { actions = [.fail(pending.waiters, key, .shutDown)] }
        } else if entry.pausedWhileVerifying {
            // The caller paused it while the file was hashed: the newer version waits, suspended, for a resume.
            entry.pausedWhileVerifying = false
            entry.phase = .suspended
            entry.expectation = expectation
            entry.otherExpectations.removeAll { $0.algorithm == expectation.algorithm }
            entry.replacesCompletedFile = true
            actions = [.publish(key, .suspended)]
            if !pending.waiters.isEmpty { actions.append(.fail(pending.waiters, key, .suspended)) }
        } else {
            // A new request whose checksum the file does not have (or an unreadable file): fetch it again.
            entry.waiters += pending.waiters.map { Waiter(id: $0, expectation: expectation) }
            enqueueReplacement(key, &entry, expectation: expectation, priority: entry.priority, &actions)
        }
        entries[key] = entry
        schedule(&actions)
        return actions
    }

    // MARK: - Transitions

    /// Queues a download of the current version that replaces the completed file only once verified. The caller
    /// stores the entry and schedules.
    mutating func enqueueReplacement(
        _ key: Key, _ entry: inout Entry, expectation: Checksum, priority: Int, _ actions: inout [Action]
    ) {
        entry.phase = .queued
        entry.priority = priority
        entry.expectation = expectation
        entry.otherExpectations.removeAll { $0.algorithm == expectation.algorithm }
        entry.replacesCompletedFile = true
        queue.push(key, priority: priority)
        actions.append(.publish(key, .queued))
    }

    /// Settles a download whose transfer ended; `next` is what was asked while it stopped (`nil`: nothing).
    mutating func finish(
        _ key: Key, _ entry: inout Entry, generation: Generation, _ end: TransferEnd, next: Next?,
        _ actions: inout [Action]
    ) {
        switch end {
        case .completed(let checksum):
            entry.phase = .completed
            entry.hasCompletedFile = true
            entry.replacesCompletedFile = false
            entry.checksum = checksum
            actions += [.complete(key, generation), .publish(key, .completed)]
            answer(key, &entry, checksum: checksum, &actions)
        case .failed(let error):
            if entry.replacesCompletedFile {
                // The completed file stays the download's: only a verified file replaces it. Said as a warning too,
                // for the requests that asked for it without waiting.
                entry.phase = .completed
                entry.replacesCompletedFile = false
                actions += [.publish(key, .completed), .warn(key, .error(error))]
            } else {
                entry.phase = .failed
                entry.error = error
                actions += [.recordFailure(key, error), .publish(key, .failed)]
            }
            let waiters = entry.waiters.map(\.id)
            entry.waiters = []
            if !waiters.isEmpty { actions.append(.fail(waiters, key, .error(error))) }
        case .cancelled where next == .resume && !isShuttingDown:
            // Resumed while it stopped: continue in the same slot.
            nextGeneration += 1
            slotsInUse += 1
            entry.phase = .running(nextGeneration)
            let start = Start(
                expectation: entry.expectationForStart(), replacesCompletedFile: entry.replacesCompletedFile)
            actions += [.start(key, nextGeneration, start), .publish(key, .downloading)]
        case .cancelled:
            entry.phase = .suspended
            actions.append(.publish(key, .suspended))
            let waiters = entry.waiters.map(\.id)
            entry.waiters = []
            if !waiters.isEmpty { actions.append(.fail(waiters, key, isShuttingDown ? .shutDown : .suspended)) }
        }
    }

    /// Answers the waiters of a completed download, each against its own expectation.
    func answer(_ key: Key, _ entry: inout Entry, checksum: Checksum?, _ actions: inout [Action]) {
        let answered = Set(entry.waiters.compactMap(\.expectation))
        var succeeded: [WaiterID] = []
        for waiter in entry.waiters {
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
            } else if let index = entry.verifying.firstIndex(where: { $0.expectation == expectation }) {
                entry.verifying[index].waiters.append(waiter.id)
            } else {
                entry.verifying.append((expectation, [waiter.id], false))
                actions.append(.verify(key, expectation))
            }
        }
        entry.waiters = []
        if !succeeded.isEmpty { actions.append(.succeed(succeeded, key)) }
        // The expectations nobody waits for any more (their caller went, or the process restarted): compared too,
        // and a mismatch is said as a warning. One that needs the file hashed again stays kept until it is answered
        // (`verified`), so that a shutdown meanwhile does not lose it.
        var kept: [Checksum] = []
        for expectation in entry.otherExpectations {
            if let checksum, checksum.algorithm == expectation.algorithm {
                if checksum != expectation && !answered.contains(expectation) {
                    actions.append(.warn(key, .mismatch(expected: expectation, actual: checksum)))
                }
                continue
            }
            kept.append(expectation)
            if !entry.verifying.contains(where: { $0.expectation == expectation }) {
                entry.verifying.append((expectation, [], false))
                actions.append(.verify(key, expectation))
            }
        }
        entry.otherExpectations = kept
    }

    /// Starts waiting downloads while slots are free; once shutting down, reports when the last slot is free.
    mutating func schedule(_ actions: inout [Action]) {
        guard lifecycle == .running else {
            if lifecycle == .shuttingDown && slotsInUse == 0 {
                lifecycle = .shutDown
                actions.append(.shutDownCompleted)
            }
            return
        }
        while slotsInUse < limit, let key = queue.popFirst() {
            guard var entry = entries[key], entry.phase == .queued else { continue }
            nextGeneration += 1
            slotsInUse += 1
            entry.phase = .running(nextGeneration)
            let start = Start(
                expectation: entry.expectationForStart(), replacesCompletedFile: entry.replacesCompletedFile)
            entries[key] = entry
            actions += [.start(key, nextGeneration, start), .publish(key, .downloading)]
        }
    }
}
