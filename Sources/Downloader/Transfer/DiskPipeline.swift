import Foundation

/// The disk side of one transfer: the partial file's writer, the running hash and the saved state, fed by one ordered
/// stream of `DiskCommand`s.
///
/// Two serial stages, each the only owner of its fields:
/// - the `disk` queue takes commands in order, owns the writers, `offset` and `receivedThisRun`, and passes written
///   bytes on;
/// - the `hasher` queue owns the hash, `hashedOffset` and the saved state. It gets each batch after the disk wrote it,
///   so the hash never covers a byte that is not in the file, and writing the next batch overlaps hashing this one.
///   It holds at most `hashBacklogLimit` bytes in memory: beyond that the disk hands over only how many bytes it
///   wrote, and the hasher reads them back from the file when their turn comes, so a body streamed in one response
///   faster than it can be hashed costs page cache, not memory.
/// Writing comes first: while more than `hashYieldThreshold` bytes wait to be written, the hasher waits for the disk
/// (see `yieldToWrites()`), so that on a machine whose cores are all busy — the network side, the writer and the hasher
/// on two cores — hashing never takes the CPU the writer needs to keep up with a fast response. Hashing lags instead
/// and reads back from the page cache: CPU later, not memory.
/// A saved state counts only bytes that are durable: a third stage syncs the partial file (`fdatasync`) and then
/// saves the state the hasher built, with the file's identity taken before the sync; the sync of one window overlaps
/// receiving and hashing the next.
///
/// The network side (`Transfer` and the request's sink, see `TransferPosition`) only calls `send(_:)`, which never
/// blocks, and reads `failure` and `unwrittenBytes`. `drained()` waits until both stages have done every command;
/// after it, and before the first command, `Transfer.run()` may read and change every field directly.
final class DiskPipeline: @unchecked Sendable {
    let url: URL
    /// The partial file and its saved state.
    let files: PartialFiles
    /// The checksum the caller expects: its algorithm is the one hashed.
    let expectation: Checksum?
    /// Whether to hash without an expectation (the server's announced algorithm, else MD5).
    let hashesByDefault: Bool
    /// The most written bytes the hash stage holds in memory (see the type's summary).
    let hashBacklogLimit: Int64
    /// Whether received chunks are always copied into the pipeline's blocks (`Shared.appendWrite`); without it they
    /// are copied only while another pipeline runs in the process (`live`).
    let copiesChunks: Bool
    /// How many pipelines exist in the process: the copy into blocks is for several at once (see `appendWrite`).
    static let live = Locked(0)
    /// While more bytes than this wait to be written, the hasher waits for the writer (see `yieldToWrites()`).
    let hashYieldThreshold: Int64 = 2 << 20
    /// The disk queue is woken when this many bytes wait to be written, or `writeBatchDelay` after the first of
    /// them: at full speed each write takes 16 chunks of 16 KiB in one system call instead of one thread switch and
    /// one call per chunk (the writer then keeps ahead of a loopback server on two busy cores), and a slow or stopped
    /// flow waits at most a millisecond in memory.
    let writeBatchBytes: Int64 = 256 << 10
    let writeBatchDelay = DispatchTimeInterval.milliseconds(1)
    /// Signalled by the disk queue after each batch it wrote: the hasher waits on it while writes are behind.
    let writesProgressed = NSCondition()
    /// Told, on the durable queue, before each state is saved: its hashed length and the length of the file it synced
    /// (tests check that a state never counts a byte that was not synced).
    var willSave: (@Sendable (_ hashedLength: Int64, _ syncedLength: Int64) -> Void)?
    /// Called on the disk queue after each batch with the bytes in the file and the total if known.
    private let progress: @Sendable (Int64, Int64?) -> Void
    private let disk: DispatchQueue
    let hasher: DispatchQueue
    /// Syncs the partial file and then saves the state that counts its bytes, in order (see `saveCheckpoint`).
    let durable = DiskPipeline.durableQueues.take()

    let shared: Locked<Shared>
    /// Bytes the hasher had to read back from the file so far (any thread).
    var readBackBytes: Int64 { shared.withLock { $0.readBack } }
    /// Bytes copied into the pipeline's blocks so far (`Shared.appendWrite`; any thread).
    var copiedBytes: Int64 { shared.withLock { $0.copied } }

    /// The disk queue's fields and the hash queue's (`DiskPipeline+Stages.swift`): each stage owns its own, and
    /// `Transfer.run()` owns both while the pipeline is handed over (before the first command, and after `drained()`).
    let diskStage: QueueOwned<DiskStage>
    let hashStage: QueueOwned<HashStage>
    /// How the partial file's room is reserved (`reserveSpace`).
    let allocation: FileAllocation

    /// Creates the disk side of a transfer; nothing is opened until the first command.
    init(
        url: URL, files: PartialFiles, expectation: Checksum? = nil, hashesByDefault: Bool = true,
        hashBacklogLimit: Int64 = 1 << 20, checksFreeSpace: Bool = true, allocation: FileAllocation = .none,
        copiesChunks: Bool = false, writeBehindChunk: Int64 = WriteBehind.defaultChunk,
        progress: @escaping @Sendable (Int64, Int64?) -> Void = { _, _ in }
    ) {
        let shared = Locked(Shared())
        let disk = Self.diskQueues.take()
        let hasher = Self.hashQueues.take()
        let handedOver: @Sendable () -> Bool = { shared.withLock { $0.handedOver } }
        self.shared = shared
        self.disk = disk
        self.hasher = hasher
        diskStage = QueueOwned(
            DiskStage(checkedFreeSpace: !checksFreeSpace, writeBehind: WriteBehind(chunk: writeBehindChunk)),
            ownedBy: disk, isHandedOver: handedOver)
        let hash = expectation.map { StreamingHash($0.algorithm) } ?? (hashesByDefault ? StreamingHash(.md5) : nil)
        hashStage = QueueOwned(HashStage(hash: hash), ownedBy: hasher, isHandedOver: handedOver)
        self.allocation = allocation
        self.url = url
        self.files = files
        self.expectation = expectation
        self.hashesByDefault = hashesByDefault
        self.hashBacklogLimit = max(1, hashBacklogLimit)
        self.copiesChunks = copiesChunks
        self.progress = progress
        Self.live.withLock { $0 += 1 }
    }

    deinit {
        Self.live.withLock { $0 -= 1 }
        let reader = hashStage.valueAtTheEnd.reader
        if reader >= 0 { _ = closeDescriptor(reader) }
        // Every block queued on them held the pipeline or was awaited by it: none is left (`QueuePool`).
        Self.diskQueues.give(disk)
        Self.hashQueues.give(hasher)
        Self.durableQueues.give(durable)
    }

    /// The pipelines' queues, each one a pipeline's own until it ends.
    static let diskQueues = QueuePool(label: "Downloader.DiskPipeline.disk")
    static let hashQueues = QueuePool(label: "Downloader.DiskPipeline.hash", qos: .background)
    static let durableQueues = QueuePool(label: "Downloader.DiskPipeline.durable")

    /// The first disk error, if any (any thread).
    var failure: DownloadError? { shared.withLock { $0.failure } }

    /// Whether the partial file was given up (`abandon`; any thread).
    var isAbandoned: Bool { shared.withLock { $0.abandoned } }

    /// The most bytes that were ever sent and not yet written and hashed: the memory the pipeline held.
    var peakBufferedBytes: Int64 { shared.withLock { $0.peakBuffered } }

    /// Bytes sent to be written and not yet in the file (any thread).
    var unwrittenBytes: Int64 { shared.withLock { $0.unwritten } }

    // MARK: - Network side

    /// Queues a command after everything sent before; never blocks.
    ///
    /// The disk queue is woken only when it is idle and takes everything waiting in one batch: at full speed it
    /// writes and hashes large batches with few wake-ups, and when the flow slows or stops the idle disk takes each
    /// chunk at once, so nothing received waits in memory for more data (a `kill -9` loses only what is in flight).
    ///
    /// Two commands never wake the disk themselves: `startOver` and `describe`, which a response sends before its
    /// body. They are carried out with the body's first write (at most `writeBatchDelay` later) or with the next
    /// command that wakes the disk (every wait for the disk is a fence). With the file's last bytes sent
    /// `.withNextFence`, a small file's response and body cost the disk one wake-up, not three (issue #52).
    /// - Parameters:
    ///   - command: the command.
    ///   - wake: for a write, when the disk takes it (see `DiskWake`).
    /// - Returns: the disk error, if one happened (the caller fails its request).
    @discardableResult
    func send(_ command: DiskCommand, wake: DiskWake = .batched) -> DownloadError? {
        var count: Int64 = 0
        var copies = false
        if case .write(let data) = command {
            count = Int64(data.count)
            copies = copiesChunks || Self.live.withLock { $0 > 1 }
        }
        if case .writeAt(let data, _) = command { count = Int64(data.count) }
        let (wake, failure) = shared.withLock { shared -> (Wake, DownloadError?) in
            shared.handedOver = false
            shared.changeBuffered(by: count)
            if case .write(let data) = command, copies {
                shared.appendWrite(data, blockSize: Int(writeBatchBytes))
            } else {
                shared.commands.append(command)
            }
            shared.unwritten += count
            if shared.scheduled || command.waitsForWake || wake == .withNextFence { return (.none, shared.failure) }
            // Not scheduled: `unwritten` is exactly what waits in the inbox.
            if count == 0 || wake == .now || shared.unwritten >= writeBatchBytes {
                shared.scheduled = true
                return (.now, shared.failure)
            }
            if shared.timerArmed { return (.none, shared.failure) }
            shared.timerArmed = true
            return (.later, shared.failure)
        }
        switch wake {
        case .none: break
        case .now: disk.async { [self] in drainInbox() }
        case .later: disk.asyncAfter(deadline: .now() + writeBatchDelay) { [self] in batchDelayPassed() }
        }
        return failure
    }

    private enum Wake { case none, now, later }

    /// Writes that did not fill a batch are written now, unless a drain already took them (disk queue).
    private func batchDelayPassed() {
        let go = shared.withLock { shared -> Bool in
            shared.timerArmed = false
            guard !shared.scheduled, !shared.commands.isEmpty else { return false }
            shared.scheduled = true
            return true
        }
        if go { drainInbox() }
    }

    /// Drops the bytes that wait to be written, now and from now on: a stop keeps what is in the file, and what only
    /// reached memory is fetched again by the next run. The sync before the stop's saved state then writes at most
    /// `WriteBehind`'s two chunks, not the window a slow drive left in memory — that sync cannot be interrupted, and
    /// a signal's stop waits for it (issue #48).
    func discardUnwritten() {
        shared.withLock { shared in
            shared.discardsWrites = true
            var dropped: Int64 = 0
            shared.commands.removeAll { command in
                switch command {
                case .write(let data), .writeAt(let data, _):
                    dropped += Int64(data.count)
                    return true
                case .startOver, .describe, .checkpoint, .fence:
                    return false
                }
            }
            shared.release(unwritten: dropped)
        }
    }

    /// Whether bytes that wait to be written are dropped (`discardUnwritten`; any thread).
    var discardsWrites: Bool { shared.withLock { $0.discardsWrites } }

    /// Whether written bytes are dropped (`discardUnwritten`), for bytes the disk queue took before the stop.
    private func dropsWrites(_ count: Int64) -> Bool {
        shared.withLock { shared in
            guard shared.discardsWrites else { return false }
            shared.release(unwritten: count)
            return true
        }
    }

    /// Returns a fence that opens when both stages have done every command sent until now: open already when both are
    /// idle with nothing waiting (a transfer that waited for the disk and then waits again wakes no thread; issue #52).
    func fence() -> DiskFence {
        let fence = DiskFence()
        let idle = shared.withLock { shared in
            shared.commands.isEmpty && !shared.scheduled && !shared.hashScheduled && shared.hashWork.isEmpty
        }
        if idle {
            fence.open()
        } else {
            send(.fence(fence))
        }
        return fence
    }

    /// Waits until both stages have done every command sent; `run()` then owns the whole pipeline.
    /// - Returns: the disk error, if any.
    @discardableResult
    func drained() async -> DownloadError? {
        await fence().wait()
        // The fence passed the hasher, so every save it gave the durable queue was given before: none means no wait
        // (a small file saves no state; one hop fewer, issue #52).
        if shared.withLock({ $0.durableUsed }) {
            await withCheckedContinuation { continuation in durable.async { continuation.resume() } }
        }
        return takeOver()
    }

    /// Does what `drained()` waits for, on the calling thread when the disk queue is idle: the commands waiting in the
    /// inbox (a small file's body, which waited for the next fence: `DiskWake.withNextFence`) are carried out here,
    /// inside `disk.sync` (the disk stage stays the disk queue's), instead of waking the disk queue's thread and then
    /// the waiting task's (two thread hand-offs a small file; issue #52). Otherwise it waits as `drained()` does.
    /// - Important: it blocks: call it from a `Blocking` body, never from a task.
    /// - Returns: the disk error, if any.
    @discardableResult
    func drainedHere() -> DownloadError? {
        let claimed = shared.withLock { shared -> Bool in
            guard !shared.scheduled, !shared.commands.isEmpty else { return false }
            shared.scheduled = true
            return true
        }
        if claimed { disk.sync { drainInbox() } }
        fence().waitBlocking()
        return takeOver()  // its `durable.sync` waits for any save the hasher gave the durable queue
    }

    /// The end of `drained()` and `drainedHere()`: both stages and the durable queue are idle, and the caller takes the
    /// pipeline over.
    private func takeOver() -> DownloadError? {
        // The queues are idle, so these return at once; they order every stage's last access before the caller's next
        // one (ThreadSanitizer does not always see that order through the continuation), and the pipeline is the
        // caller's until its next command (`QueueOwned`).
        disk.sync {}
        hasher.sync {}
        durable.sync {}
        shared.withLock { shared in
            if shared.commands.isEmpty && !shared.scheduled { shared.handedOver = true }
        }
        return failure
    }

    // MARK: - Disk queue

    func changeBuffered(by count: Int64) {
        shared.withLock { $0.changeBuffered(by: count) }
    }

    func fail(_ failure: DownloadError) {
        shared.withLock { if $0.failure == nil { $0.failure = failure } }
    }

    /// Carries out every command waiting in the inbox, in order; consecutive writes reach the hasher as one batch.
    private func drainInbox() {
        while true {
            let commands = shared.withLock { shared -> [DiskCommand]? in
                guard !shared.commands.isEmpty else {
                    shared.scheduled = false
                    return nil
                }
                defer { shared.commands.removeAll(keepingCapacity: true) }
                return shared.commands
            }
            guard let commands else { return }
            var batch: [HashPiece] = []
            var writes: [Data] = []
            var writeBytes: Int64 = 0
            for command in commands {
                if case .write(let data) = command {
                    writes.append(data)
                    writeBytes += Int64(data.count)
                    // A long batch is written a chunk at a time, each handed to the drive (`WriteBehind`); a stop
                    // that comes meanwhile drops the rest (`discardUnwritten`).
                    if writeBehind.isOn && writeBytes >= writeBehind.chunk {
                        append(&writes, to: &batch)
                        hashLater(&batch)
                        writeBytes = 0
                    }
                    continue
                }
                writeBytes = 0
                append(&writes, to: &batch)
                hashLater(&batch)
                switch command {
                case .write: break
                case .writeAt(let data, let at):
                    guard !dropsWrites(Int64(data.count)) else { continue }
                    write(data, at: at)
                    shared.withLock { $0.release(unwritten: Int64(data.count)) }
                case .startOver(let announced):
                    guard failure == nil else { continue }
                    hasher.sync { resetHash(announced: announced) }
                    do throws(DownloadError) {
                        try emptyFile()
                    } catch {
                        fail(error)
                    }
                case .describe(let metadata, let every, let paced):
                    writeBehind.isOn = paced
                    checkFreeSpace(total: metadata.totalLength)
                    reserveSpace(total: metadata.totalLength)
                    total = metadata.totalLength
                    toHasher { [self] in
                        described = metadata
                        checkpointEvery = every
                    }
                case .checkpoint(let metadata):
                    checkFreeSpace(total: metadata.totalLength)
                    reserveSpace(total: metadata.totalLength)
                    total = metadata.totalLength
                    segmentBytesSinceCheckpoint = 0
                    let segments = segmentsToSave
                    toHasher { [self] in
                        described = metadata
                        checkpointEvery = nil
                        saveCheckpoint(segments: segments)
                    }
                case .fence(let fence):
                    toHasher { fence.open() }
                }
            }
            append(&writes, to: &batch)
            hashLater(&batch)
            progress(offset + beyond.reduce(0) { $0 + Int64($1.count) }, total)
        }
    }

    /// Appends consecutive writes to the partial file in as few system calls as possible, and lists what was written
    /// for the hasher (disk queue). Writes after an error are dropped: the request is failing.
    private func append(_ writes: inout [Data], to batch: inout [HashPiece]) {
        guard !writes.isEmpty else { return }
        defer { writes.removeAll(keepingCapacity: true) }
        let count = writes.reduce(Int64(0)) { $0 + Int64($1.count) }
        guard !dropsWrites(count) else { return writesProgressed.broadcast() }
        // Still unwritten while they are being written: the network side's cap covers this batch too.
        defer {
            shared.withLock { $0.unwritten -= count }
            writesProgressed.broadcast()
        }
        var written: Int64 = 0
        if failure == nil && !isAbandoned {
            do throws(DownloadError) {
                try openWriter()
                let outcome = writer!.append(writes, downloadURL: url)
                written = outcome.written
                if let failure = outcome.failure { throw failure }
            } catch {
                fail(error)
            }
        }
        offset += written
        receivedThisRun += written
        if written > 0 { isFreshlyEmptied = false }
        handOver(written: written)
        // Every byte that reached the file goes on to the hasher (a chunk cut by an error, for its written part).
        var left = written
        for data in writes {
            let part = min(left, Int64(data.count))
            left -= part
            if part == Int64(data.count) {
                batch.append(piece(for: data))
            } else {
                changeBuffered(by: -Int64(data.count) + part)
                if part > 0 { batch.append(piece(for: data.prefix(Int(part)))) }
            }
        }
    }

    /// How written bytes reach the hasher: in memory while its backlog is under the limit, else as a count it reads
    /// back from the file (the memory is released now).
    private func piece(for data: Data) -> HashPiece {
        let count = Int64(data.count)
        let inMemory = shared.withLock { shared -> Bool in
            guard shared.hashBacklog + count <= hashBacklogLimit else {
                shared.readBack += count
                shared.changeBuffered(by: -count)
                return false
            }
            shared.hashBacklog += count
            return true
        }
        return inMemory ? .bytes(data) : .fromFile(count)
    }

    /// Runs `body` on the bytes of `data`, keeping the typed error (`withUnsafeBytes` rethrows untyped).
    static func withBytes(
        of data: Data, _ body: (UnsafeRawBufferPointer) throws(DownloadError) -> Void
    ) throws(DownloadError) {
        let failure = data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) -> DownloadError? in
            do throws(DownloadError) {
                try body(buffer)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// Hands written bytes to the hasher (disk queue).
    private func hashLater(_ batch: inout [HashPiece]) {
        guard !batch.isEmpty else { return }
        let written = batch
        batch = []
        let bytes = written.reduce(Int64(0)) { total, piece in
            switch piece {
            case .bytes(let data): total + Int64(data.count)
            case .fromFile(let count): total + count
            }
        }
        toHasher(hashing: bytes) { [self] in hash(written) }
    }

    /// Queues work for the hasher after everything queued before (disk queue). The hash queue is woken only when it
    /// is idle and then takes everything waiting: at full speed one wake-up covers many batches, instead of one
    /// thread switch per 16 KiB chunk.
    ///
    /// Small work finds the hash queue idle and less than a batch waiting to be written when the flow is slower than
    /// the disk (a small file, a trickle): then it runs at once on this thread, inside `hasher.sync` (the hash stage
    /// stays the hash queue's), instead of waking another thread for it (issue #52). At full speed writes wait, and
    /// the hasher works beside the writer as before.
    /// - Parameters:
    ///   - bytes: the bytes `work` hashes.
    ///   - work: the hash stage's work.
    func toHasher(hashing bytes: Int64 = 0, _ work: @escaping @Sendable () -> Void) {
        let wake = shared.withLock { shared -> HashWake in
            if !shared.hashScheduled && bytes <= Self.inlineHashBytes && shared.unwritten < writeBatchBytes {
                shared.hashScheduled = true
                shared.hashingInline = true
                return .inline
            }
            shared.hashWork.append(work)
            defer { shared.hashScheduled = true }
            return shared.hashScheduled ? .none : .queue
        }
        switch wake {
        case .none: break
        case .queue: hasher.async { [self] in drainHashWork() }
        case .inline:
            hasher.sync(execute: work)
            shared.withLock { shared in
                shared.hashingInline = false
                shared.hashScheduled = false  // only this queue adds hash work: none came meanwhile
            }
        }
    }

    /// The most bytes that work run on the disk queue's thread hashes (`toHasher`): 64 KiB, about 0.1 ms of MD5.
    static let inlineHashBytes: Int64 = 64 << 10

    private enum HashWake { case none, queue, inline }

    /// Does the hasher's work in order until none is left (hash queue).
    private func drainHashWork() {
        while true {
            let work = shared.withLock { shared -> [@Sendable () -> Void]? in
                guard !shared.hashWork.isEmpty else {
                    shared.hashScheduled = false
                    return nil
                }
                defer { shared.hashWork.removeAll(keepingCapacity: true) }
                return shared.hashWork
            }
            guard let work else { return }
            for item in work { item() }
        }
    }

    /// Opens the partial file for appending if it is not open yet (disk queue, or drained).
    func openWriter() throws(DownloadError) {
        if writer == nil {
            writer = FileWriter(descriptor: try files.openPartial(.append), fileName: files.partialName)
        }
    }

    /// Replaces the partial file with a new empty one (disk queue, after the hasher forgot the state, or drained).
    ///
    /// A new file rather than a truncated one: whatever had the name (a planted link, a file of an older version) is
    /// unlinked, never written through, and ext4 does not flush a new file when it is closed as it does a file
    /// truncated to zero (`auto_da_alloc`: over a second for a fresh 1 GiB download).
    func emptyFile() throws(DownloadError) {
        if isFreshlyEmptied && writer != nil && offset == 0 && beyond.isEmpty && positional == nil { return }
        closeFile()
        beyond = []
        segmented = false
        offset = 0
        writeBehind.fileEmptied()
        writer = FileWriter(descriptor: try files.openPartial(.create), fileName: files.partialName)
        isFreshlyEmptied = true
    }

    /// Hands the bytes just written to the drive when `WriteBehind` says so (disk queue): a sync before a saved state,
    /// which a signal's stop cannot interrupt, then has at most about two chunks to write (issue #48).
    func handOver(written: Int64) {
        let action = writeBehind.wrote(written)
        guard action != .none, let fd = (positional ?? writer)?.openDescriptor else { return }
        if action == .waitThenStart { waitForWriteback(fd) }
        startWriteback(fd)
    }

    /// `DiskCommand.startOver` carried out at once, by the caller that owns the handed-over pipeline (`restore`, before
    /// the first command): the hash is reset and the partial file emptied without waking the disk queue (issue #52).
    func startOverNow(announced: [Checksum]) {
        guard failure == nil else { return }
        resetHash(announced: announced)
        do throws(DownloadError) {
            try emptyFile()
        } catch {
            fail(error)
        }
    }

    /// Deletes the saved state, unless none was saved since the last deletion (a small file never saves one; issue
    /// #52). Once the saving is over (`durable`), or drained.
    func removeSavedState() {
        let saved = shared.withLock { shared in
            defer { shared.stateMayExist = false }
            return shared.stateMayExist
        }
        if saved { files.removeState() }
    }
}
