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
        if configuration.removesStateWhenFinished && nothingUnfinished() {
            // Only what this package wrote goes: the journal, the lock, and the folders if nothing else is in them
            // (a stranger's file keeps its folder).
            journal?.close()
            directory.state.remove(ReceiptJournal.name, in: .state)
            directory.state.removePartialAreaIfEmpty()
            lock?.removeAndRelease()
            rmdir(directory.stateArea.path)  // fails harmlessly if another manager already re-created it, or not empty
        } else {
            journal?.close()
            lock?.release()
        }
        bridge.invalidate()
        trimmer?.stop()
        for subscriber in eventSubscribers.values { subscriber.continuation.finish() }
        eventSubscribers.removeAll()
    }

    /// Whether nothing is waiting, running, suspended, or failed with bytes to resume, and no partial file of ours is
    /// left.
    func nothingUnfinished() -> Bool {
        let pending = book.all.contains { record in
            switch record.receipt.state {
            case .completed, .idle: return false
            case .failed: return record.receipt.totalBytesWritten > 0
            case .queued, .downloading, .suspended: return true
            }
        }
        let partials = directory.state.names(in: .partial).filter { DownloadDirectory.key(ofPartialName: $0) != nil }
        return !pending && partials.isEmpty
    }

    /// Waits until every stopping transfer, verification of a completed file and pending file clean-up has ended (for
    /// tests and orderly exits).
    func waitUntilQuiet() async {
        while true {
            let stopping = transfers.filter { !machine.isRunning($0.key, generation: $0.value.generation) }
            if stopping.isEmpty && verifications.isEmpty { break }
            for transfer in stopping.values { await transfer.task.value }
            for verification in verifications.values { await verification.value }
        }
        await fileWork.barrier()
    }

    /// Writes the pending receipt changes now and waits until they are written (for tests).
    func saveReceiptsNow() {
        saveReceipts()
        journal?.flush()
    }
}
