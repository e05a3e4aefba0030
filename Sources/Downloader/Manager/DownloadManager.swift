import Foundation

/// Downloads many files at once, streamed to disk in constant memory, resumable after any interruption and verified
/// by MD5. The URL is a download's identity.
///
/// ```swift
/// let manager = try DownloadManager(configuration: .init(directory: directory))
/// let receipt = try await manager.download(url)
/// print(receipt.fileURL.path, receipt.md5!)
/// ```
///
/// At most `maximumActiveDownloads` transfer at once; the others wait as `.willResume`. A second request for a URL
/// that is waiting or running joins it; for a completed URL whose file is still there, it returns at once. Receipts
/// are saved in the directory, so a new manager (after a restart, a crash or `kill -9`) finds unfinished downloads as
/// `.suspended` and `resume` continues them by Range.
public actor DownloadManager {
    /// How this manager behaves.
    public nonisolated let configuration: Configuration
    /// Set when the receipts file could not be read at start: it was moved aside and the manager started empty.
    public nonisolated let receiptsRecoveryError: DownloadError?

    /// The last error saving the receipts file (a full disk, …), `nil` once a save succeeds again. Downloads go on
    /// regardless; only what a restart would find is affected.
    public nonisolated var receiptsSaveError: DownloadError? {
        store.lastSaveError.withLock { $0 }
    }

    private struct ActiveDownload {
        let url: URL
        let task: Task<Void, Never>
        let box: ProgressBox
        let generation: Int
        var meter = SpeedMeter()
    }

    private enum Waiter {
        case continuation(UUID, CheckedContinuation<DownloadReceipt, any Error>)
        case callback(@Sendable (Result<DownloadReceipt, DownloadError>) -> Void)
    }

    private let directory: DownloadDirectory
    private let store: ReceiptStore
    private let bridge: SessionBridge
    private let backoff: Backoff

    private var records: [URL: ReceiptRecord] = [:]
    private var order: [URL] = []
    private var scheduler: Scheduler
    /// Transfers holding a slot.
    private var active: [URL: ActiveDownload] = [:]
    /// Transfers told to stop (suspend, remove, shutdown) that have not ended yet, by generation: they still hold
    /// their slot.
    private var stopping: [Int: ActiveDownload] = [:]
    /// Work that must end before the next transfer of a URL starts: stopping transfers and file clean-ups, chained.
    private var previousWork: [URL: Task<Void, Never>] = [:]
    private var waiters: [URL: [Waiter]] = [:]
    private var progressHandlers: [URL: [@Sendable (DownloadReceipt) -> Void]] = [:]
    private var eventContinuations: [UUID: AsyncStream<DownloadEvent>.Continuation] = [:]
    private var ticker: Task<Void, Never>?
    /// Whether a save of the receipts is scheduled (see `persist()`).
    private var receiptsSaveScheduled = false
    private var nextGeneration = 0
    private var isShutDown = false

    /// Creates a manager on a directory, creating it if needed, and loads the receipts saved there.
    /// - Parameter configuration: the directory and the limits.
    /// - Throws: `DownloadError.fileSystem` when the directory cannot be created. A corrupt receipts file is not an
    ///   error: it is moved aside and reported in `receiptsRecoveryError`.
    public init(configuration: Configuration) throws {
        try DownloadDirectory(root: configuration.directory, completed: configuration.completedDirectory).createAreas()
        self.init(unvalidated: configuration)
    }

    init(unvalidated configuration: Configuration) {
        self.configuration = configuration
        directory = DownloadDirectory(root: configuration.directory, completed: configuration.completedDirectory)
        store = ReceiptStore(fileURL: configuration.directory.appendingPathComponent("receipts.json"))
        bridge = SessionBridge(
            configuration: .init(
                stallTimeout: configuration.stallTimeout, maximumRedirects: 10,
                maximumConnectionsPerHost: max(6, configuration.maximumActiveDownloads + 2)))
        backoff = Backoff(baseDelay: configuration.retryBaseDelay, maximumDelay: configuration.maximumRetryDelay)
        scheduler = Scheduler(prioritization: configuration.prioritization)

        // Temporary files of atomic writes that a crash interrupted.
        AtomicFile.removeOrphans(in: configuration.directory)
        AtomicFile.removeOrphans(in: directory.downloadingArea)
        let (loaded, error) = store.load()
        receiptsRecoveryError = error
        let directory = self.directory
        for var record in loaded {
            let url = record.receipt.url
            switch record.receipt.state {
            case .downloading, .willResume:
                // Interrupted by a crash or kill: not running any more, resumable from the partial file.
                record.receipt.state = .suspended
                record.receipt.totalBytesWritten = (FileManager.default.sizeOfItem(at: directory.partialFile(for: url)) ?? 0)
            case .suspended, .failed, .none:
                record.receipt.totalBytesWritten = (FileManager.default.sizeOfItem(at: directory.partialFile(for: url)) ?? 0)
            case .completed:
                break
            }
            record.receipt.bytesPerSecond = nil
            record.receipt.estimatedTimeRemaining = nil
            if records[url] == nil { order.append(url) }
            records[url] = record
        }
    }

    // MARK: - Starting and joining

    /// Starts (or joins) the download and returns when it is completed and verified.
    /// - Parameters:
    ///   - url: what to download; its identity.
    ///   - options: headers, expected MD5, naming. When joining a running download, its options stay.
    /// - Returns: the completed receipt; `fileURL` is the verified file.
    /// - Throws: `DownloadError` when the download fails; `CancellationError` when the calling task is cancelled (the
    ///   download is then suspended, unless another caller still waits for it).
    public func download(_ url: URL, options: DownloadOptions = DownloadOptions()) async throws -> DownloadReceipt {
        let id = UUID()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<DownloadReceipt, any Error>) in
                addWaiter(.continuation(id, continuation), for: url)
                start(url, options: options)
            }
        } onCancel: {
            Task { await self.cancelWaiter(id, for: url) }
        }
    }

    /// Starts (or joins) a download given as text: spaces and non-ASCII characters are percent-encoded first.
    /// - Throws: `DownloadError.invalidURL` or `.unsupportedScheme` for unusable text, or as `download(_:options:)`.
    public func download(_ string: String, options: DownloadOptions = DownloadOptions()) async throws -> DownloadReceipt {
        try await download(try URL.download(string), options: options)
    }

    /// Starts (or joins) the download and returns its receipt at once (block-callback style).
    /// - Parameters:
    ///   - url: what to download.
    ///   - options: headers, expected MD5, naming.
    ///   - progress: called with the receipt as bytes arrive (at most 10 times a second).
    ///   - completion: called once, when the download completes or fails.
    /// - Returns: the receipt as it is now.
    @discardableResult
    public func enqueue(
        _ url: URL, options: DownloadOptions = DownloadOptions(),
        progress: (@Sendable (DownloadReceipt) -> Void)? = nil,
        completion: (@Sendable (Result<DownloadReceipt, DownloadError>) -> Void)? = nil
    ) -> DownloadReceipt {
        if let progress { progressHandlers[url, default: []].append(progress) }
        if let completion { addWaiter(.callback(completion), for: url) }
        return start(url, options: options)
    }

    /// The receipt of a URL, if the manager knows it.
    public func receipt(for url: URL) -> DownloadReceipt? {
        records[url]?.receipt
    }

    /// Every receipt, in the order the downloads were first requested.
    public var allReceipts: [DownloadReceipt] {
        order.compactMap { records[$0]?.receipt }
    }

    // MARK: - Control

    /// Pauses a download: its transfer stops, the partial file and hash state are kept, the slot goes to the next
    /// waiting download. A waiting download is taken out of the queue.
    public func suspend(_ url: URL) {
        guard var record = records[url] else { return }
        switch record.receipt.state {
        case .downloading, .willResume:
            scheduler.remove(url)
            stopTransfer(url)
            record.receipt.state = .suspended
            record.receipt.bytesPerSecond = nil
            record.receipt.estimatedTimeRemaining = nil
            records[url] = record
            changed(url)
            schedule()
        default:
            return
        }
    }

    /// Pauses a download.
    public func suspend(_ receipt: DownloadReceipt) { suspend(receipt.url) }

    /// Continues a suspended or failed download (queued as `.willResume` until a slot is free), by Range from the
    /// partial file.
    public func resume(_ url: URL) {
        guard let record = records[url] else { return }
        switch record.receipt.state {
        case .suspended, .failed, .none:
            start(url, options: record.options)
        default:
            return
        }
    }

    /// Continues a download.
    public func resume(_ receipt: DownloadReceipt) { resume(receipt.url) }

    /// Stops a download and deletes its files (partial and completed) and its receipt. Callers waiting for it get
    /// `DownloadError.cancelled`.
    public func remove(_ url: URL) {
        guard let record = records.removeValue(forKey: url) else { return }
        order.removeAll { $0 == url }
        scheduler.remove(url)
        stopTransfer(url)
        progressHandlers[url] = nil
        let previous = previousWork[url]
        let partial = directory.partialFile(for: url)
        let state = directory.stateFile(for: url)
        let completed = record.receipt.state == .completed ? record.receipt.fileURL : nil
        previousWork[url] = Task.detached {
            await previous?.value
            for file in [partial, state] + (completed.map { [$0] } ?? []) {
                try? FileManager.default.removeItem(at: file)
            }
        }
        failWaiters(of: url, with: .cancelled(url))
        emit(.removed(url))
        persist()
        schedule()
    }

    /// Stops a download and deletes its files and receipt.
    public func remove(_ receipt: DownloadReceipt) { remove(receipt.url) }

    /// Suspends every waiting and running download.
    public func suspendAll() {
        for url in order { suspend(url) }
    }

    /// Resumes every suspended or failed download.
    public func resumeAll() {
        for url in order { resume(url) }
    }

    /// Removes every download, its files and its receipt.
    public func removeAll() {
        for url in order { remove(url) }
    }

    /// Every state change and throttled progress of every download, from now on.
    public func events() -> AsyncStream<DownloadEvent> {
        let id = UUID()
        let (stream, continuation) = AsyncStream.makeStream(of: DownloadEvent.self, bufferingPolicy: .bufferingNewest(10_000))
        if isShutDown {
            continuation.finish()
            return stream
        }
        eventContinuations[id] = continuation
        continuation.onTermination = { _ in Task { await self.removeEventContinuation(id) } }
        return stream
    }

    /// Suspends everything, waits for the transfers to stop, saves the receipts and invalidates the session. The
    /// manager accepts no work afterwards; callers still waiting get `DownloadError.cancelled`.
    public func shutdown() async {
        guard !isShutDown else { return }
        isShutDown = true
        for url in order {
            guard var record = records[url], record.receipt.state == .downloading || record.receipt.state == .willResume
            else { continue }
            scheduler.remove(url)
            stopTransfer(url)
            record.receipt.state = .suspended
            records[url] = record
            changed(url)
        }
        await waitUntilQuiet()
        ticker?.cancel()
        ticker = nil
        await store.save(order.compactMap { records[$0] })
        bridge.invalidate()
        for url in Array(waiters.keys) { failWaiters(of: url, with: .cancelled(url)) }
        for continuation in eventContinuations.values { continuation.finish() }
        eventContinuations.removeAll()
    }

    /// Waits until every stopping transfer and pending file clean-up has ended (for tests and orderly exits).
    func waitUntilQuiet() async {
        while true {
            let pending = Array(stopping.values.map(\.task)) + Array(previousWork.values)
            if pending.isEmpty { return }
            for task in pending { await task.value }
            previousWork = previousWork.filter { !pending.contains($0.value) }
            if stopping.isEmpty && previousWork.isEmpty { return }
        }
    }

    /// Writes the receipts now instead of after the debounce interval.
    func saveReceiptsNow() async {
        await store.save(order.compactMap { records[$0] })
    }

    // MARK: - Internals: starting

    @discardableResult
    private func start(_ url: URL, options: DownloadOptions) -> DownloadReceipt {
        let key = url
        var record =
            records[key]
            ?? ReceiptRecord(
                receipt: DownloadReceipt(
                    url: url, filename: DownloadDirectory.defaultFilename(for: url),
                    fileURL: directory.partialFile(for: url)),
                options: options)
        if records[key] == nil { order.append(key) }

        if isShutDown {
            records[key] = record
            failWaiters(of: url, with: .cancelled(url))
            return record.receipt
        }
        do {
            try url.validateForDownload()
        } catch {
            record.receipt.state = .failed
            record.receipt.error = error
            records[key] = record
            changed(url)
            failWaiters(of: url, with: error)
            return record.receipt
        }

        switch record.receipt.state {
        case .willResume, .downloading:
            return record.receipt  // joined
        case .completed:
            if Self.completedFileIsIntact(record.receipt) {
                records[key] = record
                succeedWaiters(of: url, with: record.receipt)
                return record.receipt
            }
            // The completed file was deleted or changed: download again.
            record.receipt = DownloadReceipt(
                url: url, filename: DownloadDirectory.defaultFilename(for: url), fileURL: directory.partialFile(for: url))
        case .none, .suspended, .failed:
            break
        }
        record.options = options
        record.receipt.state = .willResume
        record.receipt.error = nil
        records[key] = record
        scheduler.enqueue(url)
        changed(url)
        schedule()
        return records[key]!.receipt
    }

    /// Starts waiting downloads while slots are free.
    private func schedule() {
        guard !isShutDown else { return }
        while active.count + stopping.count < max(1, configuration.maximumActiveDownloads), let url = scheduler.next() {
            guard var record = records[url], record.receipt.state == .willResume else { continue }
            nextGeneration += 1
            let generation = nextGeneration
            let box = ProgressBox()
            box.update(written: record.receipt.totalBytesWritten, total: record.receipt.totalBytesExpectedToWrite)
            let previous = previousWork.removeValue(forKey: url)
            let task = makeTransferTask(url: url, options: record.options, box: box, generation: generation, after: previous)
            active[url] = ActiveDownload(url: url, task: task, box: box, generation: generation)
            record.receipt.state = .downloading
            records[url] = record
            changed(url)
        }
        startTickerIfNeeded()
    }

    /// The task that runs one download's attempts: the transfer, and on transient faults a backoff and another
    /// transfer that resumes by Range.
    private func makeTransferTask(
        url: URL, options: DownloadOptions, box: ProgressBox, generation: Int, after previous: Task<Void, Never>?
    ) -> Task<Void, Never> {
        let directory = directory
        let bridge = bridge
        let backoff = backoff
        let retryLimit = configuration.retryLimit
        let engine = Transfer.Configuration(windowSize: Int64(max(1, configuration.windowSize)))
        return Task.detached { [weak self] in
            await previous?.value
            var retries = 0
            while true {
                let transfer = Transfer(
                    url: url, options: options, directory: directory, bridge: bridge, configuration: engine,
                    progress: { written, total in box.update(written: written, total: total) })
                do throws(DownloadError) {
                    let result = try await transfer.run()
                    await self?.transferFinished(url, generation: generation, result: .success(result))
                    return
                } catch {
                    if error == .cancelled || Task.isCancelled {
                        await self?.transferStopped(url, generation: generation)
                        return
                    }
                    guard error.isTransient, retries < retryLimit else {
                        await self?.transferFinished(url, generation: generation, result: .failure(error))
                        return
                    }
                    let delay = backoff.delay(attempt: retries, retryAfter: error.retryAfter)
                    retries += 1
                    await self?.transferWillRetry(url, generation: generation, error: error)
                    do {
                        try await Task.sleep(for: .seconds(delay))
                    } catch {
                        await self?.transferStopped(url, generation: generation)
                        return
                    }
                }
            }
        }
    }

    /// Moves a running transfer to `stopping` and cancels it; its slot is freed when it has really ended.
    private func stopTransfer(_ url: URL) {
        guard let download = active.removeValue(forKey: url) else { return }
        stopping[download.generation] = download
        download.task.cancel()
        let earlier = previousWork[url]
        previousWork[url] = Task.detached {
            await earlier?.value
            await download.task.value
        }
    }

    // MARK: - Internals: transfer callbacks

    private func transferFinished(_ url: URL, generation: Int, result: Result<TransferResult, DownloadError>) {
        guard let download = active[url], download.generation == generation else {
            // Told to stop while it was finishing. A verified file still counts if the download is merely paused;
            // if the download was removed meanwhile, the file it just produced goes too.
            if case .success(let transfer) = result {
                if let record = records[url], record.receipt.state == .suspended || record.receipt.state == .willResume {
                    scheduler.remove(url)
                    complete(url, with: transfer)
                } else if records[url] == nil {
                    try? FileManager.default.removeItem(at: transfer.fileURL)
                }
            }
            transferStopped(url, generation: generation)
            return
        }
        active[url] = nil
        if var record = records[url] {
            record.receipt.bytesPerSecond = nil
            record.receipt.estimatedTimeRemaining = nil
            switch result {
            case .success(let transfer):
                complete(url, with: transfer)
                schedule()
                return
            case .failure(let error):
                record.receipt.state = .failed
                record.receipt.error = error
                record.receipt.totalBytesWritten = (FileManager.default.sizeOfItem(at: directory.partialFile(for: url)) ?? 0)
            }
            records[url] = record
            changed(url)
            if case .failure(let error) = result { failWaiters(of: url, with: error) }
        }
        schedule()
    }

    /// Records a verified file and answers everyone waiting for it.
    private func complete(_ url: URL, with transfer: TransferResult) {
        guard var record = records[url] else { return }
        record.receipt.state = .completed
        record.receipt.fileURL = transfer.fileURL
        record.receipt.filename = transfer.fileURL.lastPathComponent
        record.receipt.totalBytesWritten = transfer.length
        record.receipt.totalBytesExpectedToWrite = transfer.length
        record.receipt.md5 = transfer.md5?.hexString
        record.receipt.error = nil
        record.receipt.bytesPerSecond = nil
        record.receipt.estimatedTimeRemaining = nil
        records[url] = record
        changed(url)
        succeedWaiters(of: url, with: record.receipt)
    }

    private func transferStopped(_ url: URL, generation: Int) {
        if stopping.removeValue(forKey: generation) != nil {
            if var record = records[url], record.receipt.state == .suspended, active[url] == nil {
                // The transfer has really ended: report the partial file's true length.
                record.receipt.totalBytesWritten = (FileManager.default.sizeOfItem(at: directory.partialFile(for: url)) ?? 0)
                records[url] = record
                changed(url)
            }
        } else if let download = active[url], download.generation == generation {
            // Cancelled without being asked (should not happen): treat it as suspended.
            active[url] = nil
            if var record = records[url] {
                record.receipt.state = .suspended
                records[url] = record
                changed(url)
            }
        }
        schedule()
    }

    private func transferWillRetry(_ url: URL, generation: Int, error: DownloadError) {
        guard active[url]?.generation == generation, var record = records[url] else { return }
        record.receipt.error = error
        records[url] = record
        persist()
    }

    // MARK: - Internals: progress

    private func startTickerIfNeeded() {
        guard ticker == nil, !active.isEmpty else { return }
        ticker = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(100))
                guard let self, await self.tick() else { return }
            }
        }
    }

    /// Publishes progress of every active download whose counts moved. Returns `false` (ending the ticker) when
    /// nothing is active.
    private func tick() -> Bool {
        guard !active.isEmpty else {
            ticker = nil
            return false
        }
        var anyChange = false
        for (url, var download) in active {
            guard var record = records[url] else { continue }
            let (written, total) = download.box.current
            let speed = download.meter.sample(bytes: written)
            active[url] = download
            guard written != record.receipt.totalBytesWritten || total != record.receipt.totalBytesExpectedToWrite
            else { continue }
            record.receipt.totalBytesWritten = written
            record.receipt.totalBytesExpectedToWrite = total
            record.receipt.bytesPerSecond = speed
            record.receipt.estimatedTimeRemaining = total.flatMap { total in
                speed.flatMap { $0 > 0 ? Double(max(0, total - written)) / $0 : nil }
            }
            records[url] = record
            anyChange = true
            emit(.progress(record.receipt))
            for handler in progressHandlers[url] ?? [] { handler(record.receipt) }
        }
        if anyChange { persist() }
        return true
    }

    // MARK: - Internals: waiters, events, persistence

    private func addWaiter(_ waiter: Waiter, for url: URL) {
        waiters[url, default: []].append(waiter)
    }

    private func cancelWaiter(_ id: UUID, for url: URL) {
        guard var list = waiters[url],
            let index = list.firstIndex(where: { if case .continuation(id, _) = $0 { return true } else { return false } })
        else { return }
        guard case .continuation(_, let continuation) = list.remove(at: index) else { return }
        waiters[url] = list.isEmpty ? nil : list
        continuation.resume(throwing: CancellationError())
        if list.isEmpty { suspend(url) }
    }

    private func succeedWaiters(of url: URL, with receipt: DownloadReceipt) {
        finishWaiters(of: url, with: .success(receipt))
    }

    private func failWaiters(of url: URL, with error: DownloadError) {
        finishWaiters(of: url, with: .failure(error))
    }

    /// Answers every caller waiting for a URL, once, and forgets its progress handlers.
    private func finishWaiters(of url: URL, with result: Result<DownloadReceipt, DownloadError>) {
        let list = waiters.removeValue(forKey: url) ?? []
        progressHandlers[url] = nil
        for waiter in list {
            switch waiter {
            case .continuation(_, let continuation): continuation.resume(with: result.mapError { $0 as any Error })
            case .callback(let callback): callback(result)
            }
        }
    }

    /// A receipt changed state: save soon and tell the listeners.
    private func changed(_ url: URL) {
        guard let receipt = records[url]?.receipt else { return }
        emit(.stateChanged(receipt))
        persist()
    }

    private func emit(_ event: DownloadEvent) {
        for continuation in eventContinuations.values { continuation.yield(event) }
    }

    private func removeEventContinuation(_ id: UUID) {
        eventContinuations[id] = nil
    }

    /// Saves the receipts soon. Changes within half a second share one save, and the snapshot is taken when the
    /// save happens, so a burst of changes (a thousand small files) costs one snapshot instead of one per change.
    private func persist() {
        guard !receiptsSaveScheduled else { return }
        receiptsSaveScheduled = true
        Task { [weak self] in
            try? await Task.sleep(for: Self.receiptsSaveDelay)
            await self?.savePendingReceipts()
        }
    }

    private static let receiptsSaveDelay = Duration.milliseconds(500)

    private func savePendingReceipts() {
        guard receiptsSaveScheduled else { return }
        receiptsSaveScheduled = false
        store.scheduleSave(order.compactMap { records[$0] })
    }

    /// Whether a completed receipt's file is still there with its recorded size.
    private static func completedFileIsIntact(_ receipt: DownloadReceipt) -> Bool {
        FileManager.default.sizeOfItem(at: receipt.fileURL) == receipt.totalBytesWritten
    }
}
