import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The end of a manager's life: stopping transfers, the last save, and leaving no state behind when nothing is
/// unfinished.
extension DownloadManager {
    /// Suspends everything, waits for the transfers to stop, saves the receipts and invalidates the session. The
    /// manager accepts no work afterwards: a later request fails at once with `DownloadError.shutDown` (and a log
    /// record), and `enqueue` returns a failed receipt saying so. Callers still waiting get `DownloadError.cancelled`,
    /// and every `events()`
    /// stream finishes.
    public func shutdown() async {
        // Nothing follows the transfers now: none waits for URLSession to confirm a cancel, which a body arriving
        // faster than the process takes it can hold for minutes.
        if !machine.isShuttingDown { bridge.answerClosedRequestsAtOnce() }
        apply(machine.shutdown())
        if !machine.hasShutDown {
            await withCheckedContinuation { shutdownWaiters.append($0) }
        }
        if shutdownTask == nil {
            shutdownTask = Task { await self.finishShutdown() }
        }
        await shutdownTask?.value
    }

    func finishShutdown() async {
        ticker?.cancel()
        ticker = nil
        await fileWork.barrier()
        saveReceipts()
        // The files last, off the actor: the journal closes once its lines are written.
        let removesState = configuration.removesStateWhenFinished && !hasUnfinishedDownloads()
        let (directory, journal, lock) = (self.directory, self.journal, self.lock)
        await fileWork.run {
            journal?.close()
            // The partial folder is listed only when the state may go (it can hold many files).
            guard
                removesState
                    && !directory.state.names(in: .partial).contains(where: {
                        DownloadDirectory.key(ofPartialName: $0) != nil
                    })
            else {
                lock?.release()
                return
            }
            // Only what this package wrote goes: the journal, the lock, and the folders if nothing else is in them
            // (a stranger's file keeps its folder).
            directory.state.remove(ReceiptJournal.name, in: .state)
            directory.state.removePartialAreaIfEmpty()
            lock?.removeAndRelease()
            rmdir(directory.stateArea.path)  // fails harmlessly if another manager already re-created it, or not empty
        }
        bridge.invalidate()
        trimmer?.stop()
        for subscriber in eventSubscribers.values { subscriber.continuation.finish() }
        eventSubscribers.removeAll()
    }

    /// Whether a download is waiting, running, suspended, or failed with bytes to resume (then the state folder stays
    /// at the shutdown, as does a partial file of ours).
    func hasUnfinishedDownloads() -> Bool {
        book.all.contains { record in
            switch record.receipt.state {
            case .completed, .idle: return false
            case .failed: return record.receipt.totalBytesWritten > 0
            case .queued, .downloading, .suspended: return true
            }
        }
    }

    /// Waits until every stopping transfer, verification or inspection of a completed file and pending file clean-up
    /// has ended (for tests and orderly exits).
    func waitUntilQuiet() async {
        while true {
            let stopping = transfers.filter { !machine.isRunning($0.key, generation: $0.value.generation) }
            if stopping.isEmpty && verifications.isEmpty && inspections.isEmpty { break }
            for transfer in stopping.values { await transfer.task.value }
            for verification in verifications.values { await verification.value }
            for inspection in inspections.values { await inspection.value }
        }
        await fileWork.barrier()
    }

    /// Writes the pending receipt changes now and waits until they are written (for tests).
    func saveReceiptsNow() {
        saveReceipts()
        journal?.flush()
    }
}
