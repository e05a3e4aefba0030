import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The end of a manager's life: stopping transfers, the last save, and leaving no state behind when nothing is
/// unfinished.
extension DownloadManager {
    /// Suspends everything, waits for the transfers to stop, saves the receipts and invalidates the session. The
    /// manager accepts no work afterwards; callers still waiting get `DownloadError.cancelled`, and every `events()`
    /// stream finishes.
    public func shutdown() async {
        apply(machine.shutdown())
        if !transfersEnded {
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
            journal?.close()
            try? FileManager.default.removeItem(at: directory.journalFile)
            try? FileManager.default.removeItem(at: directory.partialArea)
            lock?.removeAndRelease()
            rmdir(directory.stateArea.path)  // fails harmlessly if another manager already re-created it
        } else {
            journal?.close()
            lock?.release()
        }
        bridge.invalidate()
        for continuation in eventContinuations.values { continuation.finish() }
        eventContinuations.removeAll()
    }

    /// Whether nothing is waiting, running, suspended, or failed with bytes to resume, and no partial file is left.
    func nothingUnfinished() -> Bool {
        let pending = book.all.contains { record in
            switch record.receipt.state {
            case .completed, .idle: return false
            case .failed: return record.receipt.totalBytesWritten > 0
            case .queued, .downloading, .suspended: return true
            }
        }
        let partials = (try? FileManager.default.contentsOfDirectory(atPath: directory.partialArea.path)) ?? []
        return !pending && partials.isEmpty
    }

    /// Waits until every stopping transfer and pending file clean-up has ended (for tests and orderly exits).
    func waitUntilQuiet() async {
        while true {
            let stopping = transfers.filter { !machine.isRunning($0.key, generation: $0.value.generation) }
            if stopping.isEmpty { break }
            for transfer in stopping.values { await transfer.task.value }
        }
        await fileWork.barrier()
    }

    /// Writes the pending receipt changes now and waits until they are written (for tests).
    func saveReceiptsNow() {
        saveReceipts()
        journal?.flush()
    }
}
