// One download's bookkeeping inside the lifecycle state machine, and the rules for the expected checksums it keeps and
// compares with its completed file.
extension DownloadManager.StateMachine {
    /// One download's bookkeeping. Only the machine holds entries (its `entries` are private): it finds one, calls its
    /// methods (here and in DownloadManager+StateMachine+EntryEvents.swift) and stores it again.
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
        /// The checksum of the completed file, when known.
        var checksum: Checksum?
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
