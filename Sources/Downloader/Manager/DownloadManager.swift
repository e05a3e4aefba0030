import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Downloads many files at once, streamed to disk in constant memory, resumable after any interruption and verified
/// (MD5, SHA-1 or SHA-256: your checksum, else the server's digest, else MD5). The URL is a download's identity.
///
/// ```swift
/// let manager = try DownloadManager(configuration: .init(directory: directory))
/// let receipt = try await manager.download(url)
/// print(receipt.fileURL.path, receipt.verification!)
/// ```
///
/// At most `maximumActiveDownloads` transfer at once; the others wait as `.queued`. A second request for a URL that
/// is waiting or running joins it; for a completed URL whose file is still there, it returns at once. Every caller's
/// own expected checksum is compared with the file it gets. Receipts — with what each download was asked: expected
/// checksums, naming, destination, headers, mirrors, priority, connections — are saved in the directory, so a new
/// manager (after a restart, a crash or `kill -9`) finds unfinished downloads as `.suspended`, and `download(url)` or
/// `resume` continues them by Range as they were asked. A delivered file belongs to one download: removing one never
/// deletes another's.
///
/// Every change of a download's life goes through one pure state machine (`DownloadManager.StateMachine`); the actor
/// carries out the actions it returns. Suspend, resume, remove and shutdown may come at any moment, also while a file
/// is being verified or moved: they never start a second transfer of bytes already on disk, and never leave a file
/// without a receipt.
public actor DownloadManager {
    /// This library's version (semantic versioning), as in the default `User-Agent`.
    public static let version = LibraryVersion.current

    typealias Machine = StateMachine<DownloadKey>

    /// How this manager behaves.
    public nonisolated let configuration: Configuration
    /// Where verified files go (`Configuration.completedDirectory`, else `directory/completed`): what a snapshot's
    /// `path` is relative to.
    public nonisolated var completedDirectory: URL { directory.completedArea }
    /// Set when saved receipts could not all be used at start: what was dropped (an entry pointing outside the
    /// completed area, an unreadable line, an old file that could not be taken over) and why.
    public nonisolated let receiptsRecoveryError: DownloadError?

    /// The last error saving the receipts (a full disk, …), `nil` once a save succeeds again. Downloads go on
    /// regardless; only what a restart would find is affected. `events()` reports it too.
    public nonisolated var receiptsSaveError: DownloadError? {
        journal?.lastSaveError.withLock { $0 } ?? openError
    }

    /// A transfer generation that has started and not yet reported its end.
    struct RunningTransfer {
        let generation: Machine.Generation
        let task: Task<Void, Never>
        let report: TransferReport
        var meter = SpeedMeter()
        /// Ticks in a row in which no byte arrived.
        var idleTicks = 0
        /// When the put-off save of a queued download's start is due (`savesStartLater`), in nanoseconds of
        /// `DispatchTime`; `nil` when none is put off.
        var startSaveDue: UInt64?
    }

    /// Where the answer to a waiter of the machine (`StateMachine.Waiter`, by its id) goes when its download ends.
    enum Recipient {
        case continuation(CheckedContinuation<DownloadReceipt, any Error>)
        case callback(@Sendable (Result<DownloadReceipt, DownloadError>) -> Void)
        /// A request of a batch: its outcome goes to the batch, and a completed download then leaves memory.
        case batch(Batch, DownloadRequest)
    }

    let directory: DownloadDirectory
    /// The receipts on disk; `nil` when the directory could not be opened (`openError`).
    let journal: ReceiptJournal?
    /// Held for the manager's life: one owner per state directory.
    let lock: DirectoryLock?
    /// Why the directory could not be opened, for a manager that then refuses every request.
    let openError: DownloadError?
    let bridge: SessionBridge
    let runner: TransferRunner
    /// Returns freed memory to the system while downloads run (`Configuration.memoryBudget`).
    let trimmer: MallocTrimmer?
    nonisolated let fileWork = FileWorkQueue()

    var machine: Machine
    var book = ReceiptBook<DownloadKey>(identify: { DownloadDirectory.key(for: $0.url) })
    var transfers: [DownloadKey: RunningTransfer] = [:]
    /// A download's verified file: where it is and how long it is (the machine's `completedFile(of:)`).
    struct CompletedFile: Equatable, Sendable {
        var url: URL
        var length: Int64
    }

    /// How each waiter of the machine is answered.
    var recipients: [Machine.WaiterID: Recipient] = [:]
    /// How deep `apply` calls are nested (the machine forgets a batch's completed downloads after the outermost).
    var applyDepth = 0
    /// The last number given to a waiter or a request (`makeNumber()`).
    var lastNumber = 0
    /// The `enqueue` callbacks that take a download's progress (see `CallbackChannel`).
    var progressHandlers: [DownloadKey: [CallbackChannel]] = [:]
    /// The `events()` and `events(for:)` streams.
    var eventSubscribers: [UUID: EventSubscriber] = [:]
    var ticker: Task<Void, Never>?
    /// Downloads whose record changed since the last save, and whether a save is scheduled (see `persist(_:)`).
    var unsavedURLs: Set<DownloadKey> = []
    var receiptsSaveScheduled = false
    /// The shutdown: whether it began and whether its transfers ended is the machine's `lifecycle`; these are only
    /// who waits for the transfers to end, and the one-time finishing work (the last save, the lock, the session).
    var shutdownWaiters: [CheckedContinuation<Void, Never>] = []
    var shutdownTask: Task<Void, Never>?
    /// The URL with its credentials, for the requests of downloads asked with a user or password (keyed by the URL
    /// without them, the download's identity). In memory only: credentials are never saved.
    var credentialedURLs: [DownloadKey: URL] = [:]
    /// Completed files being hashed for an expectation (`verify`), until they report.
    var verifications: [UUID: Task<Void, Never>] = [:]
    /// The requests the machine holds (`.hold` to `.releaseRequest`), by request number.
    var heldRequests: [Machine.RequestID: HeldRequest] = [:]
    /// Completed files being looked at, and moved, off the actor (`.inspectCompletedFile`), until they report.
    var inspections: [Machine.RequestID: Task<Void, Never>] = [:]

    /// Creates a manager on a directory, creating it if needed, and loads the receipts saved there.
    ///
    /// One manager owns a state directory at a time: the manager takes an advisory lock on it for its life (released
    /// by `shutdown()`), so two processes — or two managers in one process — never write the same files.
    /// - Parameter configuration: the directory and the limits.
    /// - Throws: `DownloadError.directoryLocked` when another manager owns the directory (after waiting up to
    ///   `directoryLockTimeout`); `DownloadError.fileSystem` when the directory cannot be created or its journal
    ///   opened. Saved receipts that cannot be used are not an error: they are dropped and reported in
    ///   `receiptsRecoveryError`.
    public init(configuration: Configuration) throws {
        let directory = Self.layout(configuration)
        try directory.createAreas()
        let lock = try DirectoryLock.acquire(directory.state, timeout: configuration.directoryLockTimeout)
        let relay = SaveErrorRelay()
        let recovered: Recovered
        do {
            try directory.createAreas()  // again: the previous owner may have removed the state folder meanwhile
            recovered = try Self.recover(directory, onSaveError: relay.forward)
        } catch {
            lock.release()
            throw error
        }
        self.init(configuration, directory: directory, lock: lock, recovered: recovered, openError: nil)
        relay.connect { [weak self] error in Task { await self?.receiptsSaveChanged(error) } }
        if configuration.continuesInterruptedDownloads {
            Task { [weak self] in await self?.resumeInterrupted() }
        }
    }

    /// A manager whose directory could not be opened: every request fails with `error` (for `shared`, which cannot
    /// throw).
    init(unusable configuration: Configuration, error: DownloadError) {
        self.init(configuration, directory: Self.layout(configuration), lock: nil, recovered: nil, openError: error)
    }

    private init(
        _ configuration: Configuration, directory: DownloadDirectory, lock: DirectoryLock?, recovered: Recovered?,
        openError: DownloadError?
    ) {
        self.configuration = configuration
        self.directory = directory
        self.lock = lock
        self.openError = openError
        journal = recovered?.journal
        receiptsRecoveryError = recovered?.problem
        bridge = SessionBridge(
            configuration: .init(
                stallTimeout: configuration.stallTimeout, maximumRedirects: 10,
                // Room for every active download's segments at 4 connections (or the default, if more); beyond
                // that libcurl queues a request until a connection to its host is free.
                maximumConnectionsPerHost: max(
                    6, configuration.maximumActiveDownloads * max(4, configuration.connectionsPerDownload) + 2,
                    configuration.maximumConnectionsPerHost ?? 0),
                lowestSpeed: configuration.lowestSpeedLimit.map {
                    (Double($0), max(0.1, configuration.lowestSpeedInterval))
                }, userAgent: configuration.userAgent, prepareRequest: configuration.prepareRequest,
                credentials: HostCredentials(configuration.credentials),
                connectionCap: configuration.maximumConnectionsPerHost,
                cookies: configuration.cookies ?? DownloadCookieJar()))
        var engine = Transfer.Configuration(
            windowSize: Int64(max(1, configuration.windowSize)),
            firstWindowSize: Int64(max(1, configuration.firstWindowSize)),
            firstRequestBudget: configuration.firstRequestBudget,
            connections: configuration.connectionsPerDownload,
            minimumSegmentSize: configuration.minimumSegmentSize, checksFreeSpace: configuration.checksFreeSpace,
            fileAllocation: configuration.fileAllocation, beforeRestore: .init(call: configuration.beforeRestore))
        if let budget = configuration.memoryBudget {
            engine = engine.fitting(memory: Int64(budget) / Int64(max(1, configuration.maximumActiveDownloads)))
        }
        trimmer = configuration.memoryBudget != nil ? MallocTrimmer() : nil
        runner = TransferRunner(
            directory: directory, bridge: bridge,
            backoff: Backoff(baseDelay: configuration.retryBaseDelay, maximumDelay: configuration.maximumRetryDelay),
            retryLimit: configuration.retryLimit, engine: engine,
            sharedLimiter: BandwidthLimiter(bytesPerSecond: configuration.maximumBytesPerSecond))
        machine = Machine(limit: configuration.maximumActiveDownloads, prioritization: configuration.prioritization)
        for record in recovered?.records ?? [] {
            let key = DownloadKey(record.receipt.url)
            let hasCompletedFile = record.receipt.state == .completed || record.replacesCompletedFile
            machine.restore(
                key, state: record.receipt.state, checksum: record.receipt.checksum,
                expectations: record.savedExpectations, priority: record.options.priority,
                replacesCompletedFile: record.replacesCompletedFile, interrupted: record.receipt.isInterrupted,
                completedFile: hasCompletedFile
                    ? CompletedFile(url: record.receipt.fileURL, length: record.receipt.totalBytesWritten) : nil)
            book[key] = record
            book[key]?.receipt.expectedChecksum = record.savedExpectations.own
        }
    }

    /// Where a configuration puts things.
    static func layout(_ configuration: Configuration) -> DownloadDirectory {
        DownloadDirectory(
            root: configuration.directory, completed: configuration.completedDirectory,
            state: configuration.stateDirectory)
    }

    // MARK: - Starting and joining

    /// Starts (or joins, or continues) the download and returns when it is completed and verified.
    ///
    /// A download keeps what it was asked, across restarts. A request for a waiting or running download joins it: its
    /// options stay, but this caller's expected checksum is compared with the file for this caller; a request that
    /// contradicts them — another destination or file name — is refused at once with `.conflictingOptions` (equal
    /// options, or none, join). A request for a suspended or failed download (also one found after a restart)
    /// continues it: options this request sets replace the saved ones, options it leaves at their defaults keep them
    /// (headers are merged by name, mirrors added). An expected checksum joins the ones the download keeps; one that
    /// contradicts the download's own (the same algorithm, another digest) is refused at once with
    /// `.conflictingOptions` — except for a failed download, which starts a new attempt with it, and a completed one,
    /// for which another digest means the server may have a newer version: it is fetched and replaces the file only if
    /// it matches.
    /// - Parameters:
    ///   - url: what to download; its identity.
    ///   - options: headers, expected checksum, naming, destination, … (see above for a download that exists).
    /// - Returns: the completed receipt; `fileURL` is the verified file.
    /// - Throws: `DownloadError` when the download fails, is suspended (`.suspended`) or removed, or the manager
    ///   shuts down (`.cancelled`), or had shut down before this request (`.shutDown`: nothing was started);
    ///   `.checksumMismatch` when the file is not the one this caller expected; `.conflictingOptions` when this
    ///   caller's options contradict the unfinished download's (see above); `CancellationError` when the calling task
    ///   is cancelled (the download is then suspended, unless another caller still waits for it).
    public func download(_ url: URL, options: DownloadOptions = DownloadOptions()) async throws -> DownloadReceipt {
        let key = identify(url)
        let id = makeNumber()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<DownloadReceipt, any Error>) in
                recipients[id] = .continuation(continuation)
                request(key, options: options, waiter: id)
            }
        } onCancel: {
            Task { await self.cancelWaiter(id, of: key) }
        }
    }

    /// Starts (or joins) a download given as text: spaces and non-ASCII characters are percent-encoded first.
    /// - Throws: `DownloadError.invalidURL` or `.unsupportedScheme` for unusable text, or as `download(_:options:)`.
    public func download(_ string: String, options: DownloadOptions = DownloadOptions()) async throws -> DownloadReceipt
    {
        try await download(try URL.download(string), options: options)
    }

    /// Starts (or joins, or continues) the download and returns its receipt at once (block-callback style). Options
    /// and expected checksums are taken as by `download(_:options:)`; without a `completion`, what would fail this
    /// caller (a checksum that contradicts the download's, or that the file turns out not to have) is said by a
    /// `DownloadEvent.warning`.
    /// - Parameters:
    ///   - url: what to download.
    ///   - options: headers, expected checksum, naming, destination, …
    ///   - progress: called with the receipt as bytes arrive (at most 10 times a second), until the download stops.
    ///     A slow callback gets the newest receipt next (calls are coalesced, never queued without bound).
    ///   - completion: called once, after the last progress call, when the download completes, fails, is suspended
    ///     or removed, or the manager shuts down; at once with `.shutDown` for a request after `shutdown()`. Name it:
    ///     a single trailing closure is `progress` (Swift matches it to the first closure parameter).
    ///
    /// Both run in order on a serial dispatch queue of their own, never on the manager's actor: a slow (even blocking)
    /// callback delays only its own later calls, not the manager or another download.
    /// - Returns: the receipt as it is now; after `shutdown()`, a failed receipt whose error is `.shutDown` (nothing
    ///   was started or saved).
    @discardableResult
    public func enqueue(
        _ url: URL, options: DownloadOptions = DownloadOptions(),
        progress: (@Sendable (DownloadReceipt) -> Void)? = nil,
        completion: (@Sendable (Result<DownloadReceipt, DownloadError>) -> Void)? = nil
    ) -> DownloadReceipt {
        let key = identify(url)
        var id: Machine.WaiterID?
        // The callbacks run on a dispatch queue of their own, never on this actor (see `CallbackChannel`).
        let channel =
            progress != nil || completion != nil ? CallbackChannel(progress: progress, completion: completion) : nil
        if let channel, completion != nil {
            id = makeNumber()
            recipients[id!] = .callback { channel.complete($0) }
        }
        if let channel, progress != nil { progressHandlers[key, default: []].append(channel) }
        request(key, options: options, waiter: id)
        if machine.state(of: key)?.isResting ?? true { endProgress(key) }
        if machine.isShuttingDown {  // refused: the receipt says so (the completion, if any, has the same error)
            var refused = book[key]?.receipt ?? freshReceipt(for: key)
            refused.state = .failed
            refused.error = .shutDown(key.url)
            return refused
        }
        return book[key]?.receipt
            ?? DownloadReceipt(url: key.url, filename: "", fileURL: directory.partialFile(for: key.url))
    }

    /// The receipt of a URL, if the manager knows it.
    public func receipt(for url: URL) -> DownloadReceipt? {
        book[DownloadKey(url.withoutCredentials)]?.receipt
    }

    /// The receipt whose `DownloadReceipt.identifier` is `identifier`, if the manager knows that download.
    public func receipt(identifiedBy identifier: String) -> DownloadReceipt? {
        book.key(identifiedBy: identifier).flatMap { book[$0]?.receipt }
    }

    /// Every receipt, in the order the downloads were first requested. For many downloads, `receipts(after:limit:)`
    /// reads them a page at a time.
    public var allReceipts: [DownloadReceipt] {
        book.all.map(\.receipt)
    }

    /// A page of receipts in the order the downloads were first requested: a listing of any length without copying
    /// every receipt at once. Downloads added while paging appear on a later page; removed ones are skipped.
    /// - Parameters:
    ///   - cursor: `nil` for the first page, else the `next` of the page before.
    ///   - limit: at most this many receipts (at least 1).
    /// - Returns: the receipts, and the cursor of the next page (`nil` after the last receipt).
    public func receipts(
        after cursor: ReceiptCursor?, limit: Int
    ) -> (receipts: [DownloadReceipt], next: ReceiptCursor?) {
        let (records, next) = book.page(after: cursor?.serial, limit: limit)
        return (records.map(\.receipt), next.map(ReceiptCursor.init(serial:)))
    }

    /// Where a page of `receipts(after:limit:)` ended.
    public struct ReceiptCursor: Sendable, Hashable {
        let serial: Int
    }

    // MARK: - Control

    /// Pauses a download: its transfer stops, the partial file and hash state are kept, the slot goes to the next
    /// waiting download once the transfer has ended. A waiting download leaves the queue. Callers waiting for it get
    /// `DownloadError.suspended` (or the receipt, if it completed while stopping).
    public func suspend(_ url: URL) {
        apply(machine.suspend(DownloadKey(url.withoutCredentials)))
    }

    /// Pauses a download: the same as `suspend(receipt.url)` (both forms stay, see <doc:Design>).
    public func suspend(_ receipt: DownloadReceipt) { suspend(receipt.url) }

    /// Pauses the download whose `DownloadReceipt.identifier` is `identifier`, as `suspend(_:)` does.
    /// - Returns: whether the manager knows that download.
    @discardableResult
    public func suspend(identifiedBy identifier: String) -> Bool {
        guard let key = book.key(identifiedBy: identifier) else { return false }
        apply(machine.suspend(key))
        return true
    }

    /// Continues a suspended or failed download (queued until a slot is free), by Range from the partial file.
    public func resume(_ url: URL) {
        let key = identify(url)
        apply(machine.resume(key))
    }

    /// Continues a download: the same as `resume(receipt.url)` (both forms stay, see <doc:Design>).
    public func resume(_ receipt: DownloadReceipt) { resume(receipt.url) }

    /// Continues the download whose `DownloadReceipt.identifier` is `identifier`, as `resume(_:)` does.
    /// - Returns: whether the manager knows that download.
    @discardableResult
    public func resume(identifiedBy identifier: String) -> Bool {
        guard let key = book.key(identifiedBy: identifier) else { return false }
        resume(key.url)
        return true
    }

    /// Stops a download and deletes its files (partial and completed) and its receipt. Callers waiting for it get
    /// `DownloadError.cancelled`. Files of other downloads are never touched, even one with the same bytes.
    public func remove(_ url: URL) {
        apply(machine.remove(DownloadKey(url.withoutCredentials)))
    }

    /// Stops a download and deletes its files and receipt: the same as `remove(receipt.url)` (both forms stay, see
    /// <doc:Design>).
    public func remove(_ receipt: DownloadReceipt) { remove(receipt.url) }

    /// Removes the download whose `DownloadReceipt.identifier` is `identifier`, its files and receipt, as `remove(_:)`
    /// does.
    /// - Returns: whether the manager knew that download.
    @discardableResult
    public func remove(identifiedBy identifier: String) -> Bool {
        guard let key = book.key(identifiedBy: identifier) else { return false }
        apply(machine.remove(key))
        return true
    }

    /// Drops a download's receipt but keeps its completed file where it is: the manager no longer knows the URL, and
    /// a later request downloads it again. A download that is not complete has no file of the user's to keep; it is
    /// removed as by `remove(_:)` (its partial file is deleted). Callers waiting for it get `DownloadError.cancelled`.
    public func forget(_ url: URL) {
        let key = DownloadKey(url.withoutCredentials)
        // The machine releases the completed file first (`releaseCompletedFile`): unknown to the actor, it is never
        // deleted (not even by a replacement still stopping); it is the user's now, claimed by no download. A
        // download already removed (its files going) is not forgotten again (the machine ignores it).
        apply(machine.remove(key, keepingCompletedFile: true))
    }

    /// Drops a download's receipt, keeping its completed file: the same as `forget(receipt.url)` (both forms stay,
    /// see <doc:Design>).
    public func forget(_ receipt: DownloadReceipt) { forget(receipt.url) }

    /// Drops the receipt of the download whose `DownloadReceipt.identifier` is `identifier`, keeping its completed
    /// file, as `forget(_:)` does.
    /// - Returns: whether the manager knew that download.
    @discardableResult
    public func forget(identifiedBy identifier: String) -> Bool {
        guard let key = book.key(identifiedBy: identifier) else { return false }
        forget(key.url)
        return true
    }

    /// Changes how many downloads transfer at once. Raising it starts waiting downloads now; lowering it stops
    /// nothing: running downloads finish, and fewer start until the count is below the new limit.
    /// - Parameter limit: at least 1 (smaller values count as 1).
    public func setMaximumActiveDownloads(_ limit: Int) {
        apply(machine.setLimit(limit))
    }

    /// How many downloads may transfer at once (see `setMaximumActiveDownloads(_:)`).
    public var maximumActiveDownloads: Int { machine.limit }

    /// Changes the bandwidth limit all downloads share (`Configuration.maximumBytesPerSecond`). Every request asked
    /// from now on keeps the new limit; a running download keeps the window size it began with (a download started
    /// without a limit asks for whole windows, each paced) until its next start.
    /// - Parameter limit: bytes per second, at least 1; `nil` for no limit.
    public func setMaximumBytesPerSecond(_ limit: Int?) {
        runner.sharedLimiter.change(to: limit)
    }

    /// The bandwidth limit all downloads share now, in bytes per second; `nil` for none (see
    /// `setMaximumBytesPerSecond(_:)`).
    public var maximumBytesPerSecond: Int? { runner.sharedLimiter.bytesPerSecond }

    /// Suspends every waiting and running download.
    public func suspendAll() {
        for url in book.keys { apply(machine.suspend(url)) }
    }

    /// Resumes every suspended or failed download.
    public func resumeAll() {
        for url in book.keys { apply(machine.resume(url)) }
    }

    /// Removes every download, its files and its receipt.
    public func removeAll() {
        for url in book.keys { apply(machine.remove(url)) }
    }
}

extension DownloadManager {
    /// Makes a manager on a directory like `init(configuration:)`, waiting for another manager to let go of the
    /// directory without blocking a thread: for `async` code such as a service's start-up.
    ///
    /// It waits up to `Configuration.directoryLockTimeout` (`.infinity`: as long as it takes), trying the lock every
    /// 50 ms; the directory is created and the saved receipts are read on a thread of Dispatch's, never on a
    /// cooperative thread.
    /// - Parameter configuration: the directory and the limits.
    /// - Returns: the manager, which owns the directory until `shutdown()`.
    /// - Throws: `CancellationError` when the calling task is cancelled while waiting; otherwise what
    ///   `init(configuration:)` throws (`DownloadError.directoryLocked` once the timeout has passed).
    public static func make(configuration: Configuration) async throws -> DownloadManager {
        var attempt = configuration
        attempt.directoryLockTimeout = 0
        let timeout = configuration.directoryLockTimeout
        let deadline = timeout.isFinite ? ContinuousClock.now + .milliseconds(Int64(max(0, timeout) * 1000)) : nil
        let once = attempt
        while true {
            try Task.checkCancellation()
            do {
                return try await withCheckedThrowingContinuation { continuation in
                    DispatchQueue.global().async {
                        continuation.resume(with: Result { try DownloadManager(configuration: once) })
                    }
                }
            } catch let error as DownloadError where error == .directoryLocked {
                if let deadline, ContinuousClock.now >= deadline { throw error }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }
}

extension DownloadManager {
    /// The shared manager, keeping its files in the user's cache directory (`$XDG_CACHE_HOME` or `~/.cache` on
    /// Linux, `~/Library/Caches` on macOS) under `Downloader`.
    public static let shared: DownloadManager = {
        let configuration = Configuration(directory: defaultDirectory)
        // If the directory cannot be opened now (not creatable, or owned by another process), each download reports
        // that error itself.
        do {
            return try DownloadManager(configuration: configuration)
        } catch {
            let reason = (error as? DownloadError) ?? .fileSystem(nil, reason: "\(error)")
            return DownloadManager(unusable: configuration, error: reason)
        }
    }()

    /// `<cache directory>/Downloader`.
    public static var defaultDirectory: URL {
        let environment = ProcessInfo.processInfo.environment
        #if os(Linux)
            if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") {
                return URL(fileURLWithPath: xdg, isDirectory: true).appendingPathComponent(
                    "Downloader", isDirectory: true)
            }
        #endif
        let caches =
            FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first
            ?? URL(fileURLWithPath: NSHomeDirectory(), isDirectory: true).appendingPathComponent(".cache")
        return caches.appendingPathComponent("Downloader", isDirectory: true)
    }
}

extension DownloadManager {
    /// Publishes progress every 100 ms while transfers run.
    func startTickerIfNeeded() {
        guard ticker == nil, !transfers.isEmpty else { return }
        ticker = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(100))
                guard let self, await self.tick() else { return }
            }
        }
    }

    /// Publishes progress of every running transfer whose counts moved (or, while idle, whose speed fell). Returns
    /// `false` (ending the ticker) when nothing runs.
    private func tick() -> Bool {
        guard !transfers.isEmpty else {
            ticker = nil
            return false
        }
        saveDueStarts(now: DispatchTime.now().uptimeNanoseconds)
        for (url, var transfer) in transfers where machine.isRunning(url, generation: transfer.generation) {
            let counts = transfer.report.current
            let (written, total) = (counts.written, counts.total)
            let published = book.update(url) { record -> DownloadReceipt? in
                let speed = transfer.meter.sample(bytes: written)
                let moved =
                    written != record.receipt.totalBytesWritten || total != record.receipt.totalBytesExpectedToWrite
                    || counts.requests != record.receipt.activeConnections
                // While nothing arrives, the falling speed and growing ETA are still published, once a second.
                transfer.idleTicks = moved ? 0 : transfer.idleTicks + 1
                guard moved || (transfer.idleTicks % 10 == 0 && speed != record.receipt.bytesPerSecond) else {
                    return nil
                }
                record.receipt.totalBytesWritten = written
                record.receipt.totalBytesExpectedToWrite = total
                record.receipt.bytesPerSecond = speed
                record.receipt.activeConnections = counts.requests
                record.receipt.estimatedTimeRemaining = total.flatMap { total in
                    speed.flatMap { $0 > 0 ? Double(max(0, total - written)) / $0 : nil }
                }
                return record.receipt
            }
            guard let published else { continue }  // no record
            transfers[url] = transfer
            guard let receipt = published else { continue }  // nothing to publish
            emit(.progress(receipt))
            for channel in progressHandlers[url] ?? [] { channel.progress(receipt) }
        }
        return true
    }
}
