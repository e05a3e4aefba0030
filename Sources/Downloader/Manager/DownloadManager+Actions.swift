import Dispatch
import Foundation

extension DownloadManager {
    /// Carries out the state machine's actions, in order. This is the only place that changes receipts, starts or
    /// cancels transfers, answers waiters and deletes files.
    /// - Parameters:
    ///   - actions: what the machine decided.
    ///   - requestOptions: the options of the request being handled, for `.adoptOptions`.
    ///   - produced: what the generation whose end is being handled produced, for `.complete` and `.discardFiles`.
    func apply(
        _ actions: [Machine.Action], requestOptions: DownloadOptions? = nil, produced: TransferResult? = nil
    ) {
        machine.carryingOut(actions)
        applyDepth += 1
        defer {
            applyDepth -= 1
            if applyDepth == 0 {
                let forgets = machine.forgetAnsweredDownloads()
                if !forgets.isEmpty { apply(forgets) }
            }
        }
        // By index: each action is matched where it is, not copied whole and destroyed (issue #52).
        for index in actions.indices {
            switch actions[index] {
            case .adoptOptions(let key, let fresh, nil):
                adoptOptions(key, requestOptions, fresh: fresh)
            case .adoptOptions(let key, let fresh, let id?):
                let held = heldRequests[id]
                if fresh, !book.contains(key), let held {
                    // A removal held before this request forgot the download: the request starts it anew.
                    if let credentialed = held.credentialedURL { credentialedURLs[key] = credentialed }
                    openRecord(key, options: held.options)
                }
                adoptOptions(key, held?.options, fresh: fresh)
            case .hold(let key, let id):
                heldRequests[id] = HeldRequest(
                    options: requestOptions ?? DownloadOptions(), credentialedURL: credentialedURLs[key])
            case .inspectCompletedFile(let key, let id):
                inspectCompletedFile(key, request: id)
            case .releaseRequest(let id):
                heldRequests[id] = nil
            case .warn(let key, .error(let error)):
                emit(
                    .warning(key.url, reason: "the new version was not kept, the completed file stays: \(error.reason)")
                )
            case .warn(let key, let failure):
                let error = error(for: failure, of: key)
                emit(.warning(key.url, reason: error.reason), logging: .warning(error, about: key.url))
            case .publish(let key, let state):
                publish(key, state)
            case .recordFailure(let key, let error):
                let error = credentialsHint(key, error)
                book.update(key) { $0.receipt.error = error }
            case .start(let key, let generation, let start):
                startTransfer(key, generation: generation, start)
            case .cancel(let key, let generation):
                if let transfer = transfers[key], transfer.generation == generation { transfer.task.cancel() }
            case .complete(let key, _, let replaced):
                complete(key, produced, replaced: replaced)
            case .succeed(let ids, let key):
                guard let receipt = book.update(key, \.receipt) else { continue }  // the receipt alone is copied
                answer(ids, with: .success(receipt))
            case .fail(let ids, let key, let failure):
                answer(ids, key: key, failure)
            case .verify(let key, let expectation):
                verify(key, expectation)
            case .discardFiles(let key, let generation, let completedFile):
                discardFiles(key, [generation == nil ? nil : produced?.fileURL, completedFile].compactMap { $0 })
            case .releaseCompletedFile(let key, let file):
                // A removal that keeps the file forgets the record next: only the claim is given up.
                let forgotten = actions.contains { if case .forget(key, _) = $0 { true } else { false } }
                releaseCompletedFile(key, file, keepsRecord: !forgotten)
            case .forget(let key, let keepsPlacedFile):
                book[key] = nil
                credentialedURLs[key] = nil
                endProgress(key)
                emit(.removed(key.url))
                // The removal is noted now (no hop: the journal writes it before any line handed over later, so a
                // download asked for again does not inherit the removed one's pending placement) and written with
                // the next save. A save still pending for it would only write the removal again (issue #52): dropped.
                journal?.noteRemoval(key.url, keepsPlacedFile: keepsPlacedFile)
                unsavedURLs.remove(key)
                scheduleSave()
            case .wake(let key, let delay):
                Task { [weak self] in
                    try? await Task.sleep(for: .seconds(delay))
                    await self?.retryDue(key)
                }
            case .shutDownCompleted:
                let waiting = shutdownWaiters
                shutdownWaiters = []
                for continuation in waiting { continuation.resume() }
            }
        }
    }

    // MARK: - Receipts

    /// The request's options become the download's (see `DownloadOptions.merged(into:)`).
    private func adoptOptions(_ key: DownloadKey, _ options: DownloadOptions?, fresh: Bool) {
        guard let options else { return }
        book.update(key) { record in record.options = fresh ? options : options.merged(into: record.options) }
    }

    /// The completed file is not the download's any more: its name is free for any download, and a receipt that
    /// stays points at a partial file again.
    /// - Parameter keepsRecord: `false` when the record is forgotten right after (a fresh receipt would cost 25,000
    ///   instructions for nothing, issue #52).
    private func releaseCompletedFile(_ key: DownloadKey, _ released: URL?, keepsRecord: Bool) {
        guard let released else { return }
        directory.claims.release(released, of: key.url)
        guard keepsRecord, var record = book[key] else { return }
        record.receipt.file = freshReceipt(for: key, identifier: record.identifier).file
        record.receipt.checksum = nil
        record.receipt.verification = nil
        record.suggestedFilename = nil
        book[key] = record
    }

    /// Sets the public state: speed and ETA only while downloading, the error only while failed. (The bytes written
    /// change only while a transfer runs: the ticker and the transfer's end keep them true.) One event per change: a
    /// state that is already the receipt's is not announced again (what else changed is `.progress`).
    private func publish(_ key: DownloadKey, _ state: DownloadState) {
        let kept = machine.receiptFacts(of: key)
        // Also after a replacement that failed: the receipt describes the file that is still there.
        let completed = state == .completed ? machine.completedFile(of: key) : nil
        // The receipt is changed field by field, each only when it differs, instead of compared whole with a copy of
        // itself, and copied out only for a listener (two copies and a comparison a state change; issue #52).
        let listening = configuration.log != nil || hears(.stateChanged) || hears(.progress)
        let changed = book.update(key) {
            record -> (stateChanged: Bool, differs: Bool, defers: Bool, receipt: DownloadReceipt?) in
            let stateChanged = record.receipt.state != state
            // A queued download's start changes nothing recovery reads (`savesStartLater`).
            let startsQueued = stateChanged && state == .downloading && record.receipt.state == .queued
            record.receipt.state = state
            var differs = false  // besides the state
            change(&record.receipt.expectedChecksum, to: kept.expectations.own, &differs)
            change(&record.receipt.isInterrupted, to: kept.isInterrupted, &differs)
            if let completed {
                // The name follows the file: read off its URL only when that changed (`complete` set both already
                // when a transfer placed it; 1,200 instructions a file; issue #52).
                if record.receipt.fileURL != completed.url {
                    record.receipt.file = ReceiptFile(url: completed.url, name: completed.url.fileName)
                    differs = true
                }
                change(&record.receipt.totalBytesWritten, to: completed.length, &differs)
                change(&record.receipt.totalBytesExpectedToWrite, to: completed.length, &differs)
            }
            if state != .downloading {
                change(&record.receipt.bytesPerSecond, to: nil, &differs)
                change(&record.receipt.estimatedTimeRemaining, to: nil, &differs)
                change(&record.receipt.activeConnections, to: 0, &differs)
            }
            if state != .failed && state != .completed { change(&record.receipt.error, to: nil, &differs) }
            let defers = startsQueued && !differs
            differs = differs || stateChanged
            return (stateChanged, differs, defers, listening && differs ? record.receipt : nil)
        }
        guard let (stateChanged, differs, defers, receipt) = changed else { return }
        if state.isResting && !progressHandlers.isEmpty { endProgress(key) }
        // The receipt carries the machine's expectation already: saved as it is (no `persist` look-ups again).
        guard differs else { return }
        if let receipt { emit(stateChanged ? .stateChanged(receipt) : .progress(receipt)) }
        if defers && savesStartLater(key) { return }
        markUnsaved(key)
    }

    /// Puts off saving a queued download's start until it has run `Configuration.startSaveDelay` (the ticker saves it
    /// then, `saveDueStarts`), unless another change saves it first — its placement line, its end, a retry.
    ///
    /// The `downloading` line tells recovery nothing: a download saved as queued and one saved as downloading both come
    /// back suspended and interrupted. It is what another process's listing (`dl --list`) shows, and a small file that
    /// ends within the delay is spared it: one journal line a file fewer (about 17,000 instructions; issue #52).
    /// A download resumed from suspended or failed is saved at once: a crash must not leave it looking paused by its
    /// caller.
    /// - Returns: whether the save is put off (a transfer of `key` runs).
    private func savesStartLater(_ key: DownloadKey) -> Bool {
        guard transfers[key] != nil else { return false }
        let delay = UInt64(max(0, configuration.startSaveDelay) * 1e9)
        transfers[key]?.startSaveDue = DispatchTime.now().uptimeNanoseconds + delay
        return true
    }

    /// Saves the start of every running download whose start was put off and is due (`savesStartLater`).
    /// - Parameter now: the ticker's time, in nanoseconds of `DispatchTime`.
    func saveDueStarts(now: UInt64) {
        for (key, transfer) in transfers {
            guard let due = transfer.startSaveDue, due <= now else { continue }
            transfers[key]?.startSaveDue = nil
            markUnsaved(key)
        }
    }

    /// Sets `field` to `value` when they differ, and then `differs`.
    @inline(__always)
    private func change<Value: Equatable>(_ field: inout Value, to value: Value, _ differs: inout Bool) {
        guard field != value else { return }
        field = value
        differs = true
    }

    /// Records the file a generation produced as the download's completed file in its receipt.
    private func complete(_ key: DownloadKey, _ produced: TransferResult?, replaced: URL?) {
        if let replaced { directory.claims.release(replaced, of: key.url) }  // a file at an earlier destination stays
        guard let transfer = produced else { return }
        book.update(key) { record in
            record.receipt.file = ReceiptFile(url: transfer.fileURL, name: transfer.fileName)
            record.receipt.totalBytesWritten = transfer.length
            record.receipt.totalBytesExpectedToWrite = transfer.length
            record.receipt.checksum = transfer.checksum
            record.receipt.verification = transfer.verification
            record.receipt.error = nil
            record.suggestedFilename = transfer.suggestedFilename
        }
    }

    /// A refusal (401, 403, 407) of a download whose credentials were not given again after a restart says so.
    private func credentialsHint(_ key: DownloadKey, _ error: DownloadError) -> DownloadError {
        guard let status = error.statusCode, [401, 403, 407].contains(status), let record = book[key],
            record.needsCredentials, credentialedURLs[key] == nil, !record.options.carriesSecretHeader
        else { return error }
        return error.adding(
            "it was asked with credentials (a user and password, or an Authorization or Cookie header), which are "
                + "never saved: ask for it again with them")
    }

    // MARK: - Transfers

    private func startTransfer(_ key: DownloadKey, generation: Machine.Generation, _ start: Machine.Start) {
        // What the transfer needs of the record, read where it is (a copy retains every reference it holds).
        let read = book.update(key) {
            ($0.options, $0.receipt.totalBytesWritten, $0.receipt.totalBytesExpectedToWrite, $0.identifier)
        }
        guard let (recordOptions, written, total, identifier) = read else {
            // Never expected (every download the machine runs has a record): said loudly in debug builds, and the
            // generation ends at once in release, so that nothing (a shutdown) waits for a transfer that never ran.
            assertionFailure("a transfer of \(key.url.absoluteString) was to start without the download's record")
            apply(machine.transferEnded(key, generation: generation, .cancelled))
            return
        }
        var options = recordOptions
        options.checksum = start.expectation  // the machine's: the caller's, or the new one of a replacement
        options.expectedMD5 = nil
        let replacing = start.replacesCompletedFile ? machine.completedFile(of: key)?.url : nil
        let runner = self.runner
        let fileWork = self.fileWork
        let requestURL = credentialedURLs[key] ?? key.url  // the requests carry the credentials asked with
        // The one way up from the transfer: counts, the placement (journaled before the file moves), then news and
        // the end in order.
        let report = TransferReport(
            written: written, total: total,
            placement: .init(
                journal: journal, url: key.url, options: recordOptions, expectations: machine.expectations(of: key),
                forgetsWhenPlaced: machine.isForgottenOnceCompleted(key)))
        let (runOptions, retriesMade) = (options, start.retriesMade)
        let partial = PartialFiles(folder: directory.state, url: key.url, key: identifier)
        let task = Task.detached { [weak self] in
            await fileWork.barrier()  // clean-ups of an earlier generation come first
            // News told while it runs goes up at once; the rest, and the end, once it has run.
            report.deliverWhileRunning { [weak self] message in
                await self?.transferReported(message, key: key, generation: generation, leftOnDisk: nil)
            }
            await runner.runReporting(
                url: requestURL, options: runOptions, replacing: replacing, retriesMade: retriesMade, report: report,
                partialKey: partial.key)
            for message in await report.rest() {
                // What a transfer that produced no file left on disk, read here: no file I/O on the actor.
                var leftOnDisk: Int64?
                if case .ended(_, nil) = message { leftOnDisk = partial.partialSize ?? 0 }
                await self?.transferReported(message, key: key, generation: generation, leftOnDisk: leftOnDisk)
            }
        }
        var running = RunningTransfer(generation: generation, task: task, report: report)
        _ = running.meter.sample(bytes: written)  // the speed counts from the start
        transfers[key] = running
        trimmer?.transfersRunning(transfers.count)
        startTickerIfNeeded()
    }

    /// What a generation's transfer told, in the order it told it (`TransferReport`).
    private func transferReported(
        _ message: TransferReport.Message, key: DownloadKey, generation: Machine.Generation, leftOnDisk: Int64?
    ) {
        switch message {
        case .said(.warning(let reason)): emit(.warning(key.url, reason: reason))
        case .said(.note(let message)): logNote(message, about: key)
        case .retrying(let retry): transferWillRetry(key, generation: generation, retry)
        case .ended(let end, let result):
            transferEnded(key, generation: generation, end, result: result, leftOnDisk: leftOnDisk ?? 0)
        }
    }

    private func transferEnded(
        _ key: DownloadKey, generation: Machine.Generation, _ end: Machine.TransferEnd, result: TransferResult?,
        leftOnDisk: Int64
    ) {
        var total: Int64?
        if let ended = transfers[key], ended.generation == generation {
            total = ended.report.current.total
            transfers[key] = nil
            trimmer?.transfersRunning(transfers.count)
        }
        if result == nil, machine.completedFile(of: key) == nil, var receipt = book[key]?.receipt {
            // What the stopped transfer left on disk, for the receipt (a completed file reports its own length).
            let before = receipt
            receipt.totalBytesWritten = leftOnDisk
            if let total { receipt.totalBytesExpectedToWrite = total }
            book[key]?.receipt = receipt
            if receipt != before {
                emit(.progress(receipt))
                persist(key)
            }
        }
        let file = result.map { CompletedFile(url: $0.fileURL, length: $0.length) }
        let removedBefore = !book.contains(key)
        apply(machine.transferEnded(key, generation: generation, end, produced: file), produced: result)
        // A download removed while its file was being placed: its placement record must not outlive it. One removed
        // just now (a batch forgets what it delivered) was noted after the placement was written: no second line.
        if removedBefore && !book.contains(key) { persist(key) }
    }

    /// A download's `Retry-After` is over: it takes the first place in the queue.
    private func retryDue(_ key: DownloadKey) {
        apply(machine.retryDue(key))
    }

    private func transferWillRetry(_ key: DownloadKey, generation: Machine.Generation, _ retry: TransferRunner.Retry) {
        guard machine.isRunning(key, generation: generation) else { return }
        book.update(key) { $0.receipt.error = retry.error }
        persist(key)
        emit(.retrying(key.url, attempt: retry.attempt, delay: retry.delay, reason: retry.error))
    }

    // MARK: - Files

    /// Hashes the completed file off the actor and reports it to the machine.
    private func verify(_ key: DownloadKey, _ expectation: Checksum) {
        guard let file = machine.completedFile(of: key)?.url else {
            apply(machine.verified(key, expectation: expectation, actual: nil))
            return
        }
        let id = UUID()
        verifications[id] = Task.detached { [weak self] in
            let actual = try? FileDigest.checksum(of: file, algorithm: expectation.algorithm)
            await self?.verifiedFile(key, expectation: expectation, actual: actual, id: id)
        }
    }

    private func verifiedFile(_ key: DownloadKey, expectation: Checksum, actual: Checksum?, id: UUID) {
        verifications[id] = nil
        apply(machine.verified(key, expectation: expectation, actual: actual))
        if book.contains(key) { persist(key) }  // the expectations it settled are not kept any more
    }

    /// Deletes a download's partial file and state, and `files` (what a generation produced, its completed file), on
    /// the file-work queue (after any clean-up queued before).
    private func discardFiles(_ key: DownloadKey, _ files: [URL]) {
        let partial = PartialFiles(folder: directory.state, url: key.url)
        let claims = directory.claims
        fileWork.async { [files] in
            partial.removePartial()
            partial.removeState()
            for file in files {
                try? FileManager.default.removeItem(at: file)
                claims.release(file, of: key.url)  // only once it is gone: a new file may take the name then
            }
        }
    }

    // MARK: - Waiters

    /// The error a waiter gets for a failure.
    func error(for failure: Machine.Failure, of key: DownloadKey) -> DownloadError {
        switch failure {
        case .error(let failure): return failure
        case .suspended: return .suspended(key.url)
        case .removed: return .cancelled(key.url, reason: "the download was removed")
        case .shutDown: return .cancelled(key.url, reason: "the manager shut down")
        case .afterShutdown: return .shutDown(key.url)
        case .waiterCancelled: return .cancelled(key.url)
        case .mismatch(let expected, let actual): return .checksumMismatch(key.url, expected: expected, actual: actual)
        case .conflict(let kept, let requested): return .checksumConflict(key.url, kept: kept, requested: requested)
        case .conflictingOptions(let reason): return .conflictingOptions(key.url, reason: reason)
        case .unplaced(let error): return error
        }
    }

    private func answer(_ ids: [Machine.WaiterID], key: DownloadKey, _ failure: Machine.Failure) {
        guard failure == .waiterCancelled else { return answer(ids, with: .failure(error(for: failure, of: key))) }
        for id in ids {
            switch recipients.removeValue(forKey: id) {
            case .continuation(let continuation): continuation.resume(throwing: CancellationError())
            case .callback(let callback): callback(.failure(.cancelled(key.url)))
            case .batch(let batch, let request): batch.deliver(id, request, .failure(.cancelled(key.url)))
            case nil: continue
            }
        }
    }

    /// Answers each waiter once.
    private func answer(_ ids: [Machine.WaiterID], with result: Result<DownloadReceipt, DownloadError>) {
        for id in ids {
            switch recipients.removeValue(forKey: id) {
            case .continuation(let continuation): continuation.resume(with: result.mapError { $0 as any Error })
            case .callback(let callback): callback(result)
            case .batch(let batch, let request): batch.deliver(id, request, result)
            case nil: continue
            }
        }
    }

    // MARK: - Events and persistence

    /// Saves a download's record (or its removal) within 10 ms: the changes of a burst (thousands of `enqueue` calls,
    /// one `suspendAll`) share one write to the journal, of the changed records only. What must survive a `kill -9` at
    /// any moment — a verified file moving into place — is written before the move, not here.
    func persist(_ key: DownloadKey) {
        // The expectation is the machine's: the receipt shows it as it is saved.
        let own = machine.expectations(of: key).own
        book.update(key) { record in
            if record.receipt.expectedChecksum != own { record.receipt.expectedChecksum = own }
        }
        markUnsaved(key)
    }

    /// `persist(_:)` for a record whose receipt already shows the machine's expectation.
    func markUnsaved(_ key: DownloadKey) {
        unsavedURLs.insert(key)
        scheduleSave()
    }

    /// Runs `saveReceipts()` within 10 ms, unless it is scheduled already.
    private func scheduleSave() {
        guard !receiptsSaveScheduled else { return }
        receiptsSaveScheduled = true
        Task { [weak self] in
            try? await Task.sleep(for: .milliseconds(10))
            await self?.saveReceipts()
        }
    }

    /// Hands every changed record to the journal.
    func saveReceipts() {
        receiptsSaveScheduled = false
        // In request order: the journal's order is what `allReceipts` shows after a restart.
        // Each record is read where it is (`update`), not copied out: a copy retains every reference it holds.
        let lines = book.inRequestOrder(unsavedURLs).map { key in
            book.update(key) { record in
                var entry = JournalEntry(record, expectations: machine.expectations(of: key))
                if record.receipt.state != .completed, let file = machine.completedFile(of: key) {
                    entry.replaced = .init(
                        name: file.url.fileName, length: file.length, checksum: record.receipt.checksum)
                }
                return JournalLine.put(entry)
            } ?? .remove(key.url)
        }
        unsavedURLs.removeAll(keepingCapacity: unsavedURLs.count <= ReceiptJournal.keptBatchCapacity)
        journal?.append(lines)  // with the removals noted since the last save (`noteRemoval`), if any
    }

    /// Saving the receipts started failing (`error`) or works again (`nil`).
    func receiptsSaveChanged(_ error: DownloadError?) {
        if let error {
            emit(.receiptsSaveFailed(error))
        } else {
            emit(.receiptsSaved(directory.journalFile))
        }
    }
}

/// Carries the journal's save-error reports to the manager, which exists only after the journal was opened.
final class SaveErrorRelay: Sendable {
    private let state = Locked<(target: (@Sendable (DownloadError?) -> Void)?, pending: DownloadError??)>((nil, nil))

    /// The journal's handler.
    var forward: @Sendable (DownloadError?) -> Void {
        { [self] error in
            let target = state.withLock { state -> (@Sendable (DownloadError?) -> Void)? in
                if state.target == nil { state.pending = .some(error) }
                return state.target
            }
            target?(error)
        }
    }

    /// Delivers to `target` from now on, starting with a report that came before.
    func connect(_ target: @escaping @Sendable (DownloadError?) -> Void) {
        let pending = state.withLock { state -> DownloadError?? in
            state.target = target
            defer { state.pending = nil }
            return state.pending
        }
        if let pending { target(pending) }
    }
}

/// The speed of one download in this session, averaged over the last few seconds of real time: a tick in which
/// nothing arrived counts as a slow tick, so a server that sends bursts and pauses shows its true average, and a body
/// that trickles shows a trickle. Only bytes that arrived count, not bytes resumed from disk.
struct SpeedMeter {
    /// The span the average covers, in nanoseconds.
    static let span: UInt64 = 5_000_000_000
    /// The shortest history that gives a speed at all.
    static let minimumSpan: UInt64 = 500_000_000

    private var samples: [(time: UInt64, bytes: Int64)] = []

    /// Feeds the current byte count.
    /// - Parameters:
    ///   - bytes: bytes on disk now.
    ///   - now: the time in nanoseconds.
    /// - Returns: bytes per second over the last `span` (less at the start), or `nil` before `minimumSpan`.
    mutating func sample(bytes: Int64, now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> Double? {
        if let last = samples.last, bytes < last.bytes || now < last.time { samples.removeAll() }  // restarted
        samples.append((now, bytes))
        while samples.count > 2, now - samples[1].time >= Self.span { samples.removeFirst() }
        guard let first = samples.first, now - first.time >= Self.minimumSpan else { return nil }
        return Double(bytes - first.bytes) / (Double(now - first.time) / 1e9)
    }
}
