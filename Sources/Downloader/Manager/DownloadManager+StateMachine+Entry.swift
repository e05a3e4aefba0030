// One download's bookkeeping inside the lifecycle state machine, and the rules for the expected checksums it keeps.
extension DownloadManager.StateMachine {
    /// One download's bookkeeping (internal only so that the machine's extensions in other files reach it).
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
        /// A completed file of this download is on disk (also while a replacement runs).
        var hasCompletedFile = false
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
    }
}
