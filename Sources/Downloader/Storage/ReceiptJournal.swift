import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The receipts of a manager as an append-only journal: one line per change, `URL<TAB>JSON`, so a change costs the
/// bytes of that change, not of every receipt. A line is on disk (`write(2)` returned) before `appendNow` returns, so
/// a `kill -9` loses nothing written; `fdatasync` runs at most once a second and at `close()`, so a power loss loses
/// at most the last second. The journal keeps, in memory, where each download's latest line is; when the file holds
/// more than twice the live lines it is rewritten with just them (atomically, by copying those bytes), which keeps its
/// size proportional to the receipts and costs amortised O(1) per change.
///
/// A placement line (a verified file about to move) sticks to its download: a later line that is not `completed` (the
/// manager's record may lag behind the transfer) is written with the placement, until a completed line or a removal
/// supersedes it, so recovery always knows where a verified file may have gone. A placement line that says the download
/// is forgotten once placed (`JournalEntry.forgetsWhenPlaced`, a batch's) stands for its removal: when it is the
/// download's last line, the removal writes nothing and only drops the line from the live ones.
///
/// A write that fails (a full disk) is undone (the file is cut back to its last whole line), reported through
/// `lastSaveError` and the `onSaveError` handler, and retried with the next change and every second until it
/// succeeds. All state is confined to one serial queue. The file is reached through the state folder's descriptor:
/// a `journal` planted as a symbolic link is refused, never read or written through.
final class ReceiptJournal: @unchecked Sendable {
    /// The journal's name in the state folder.
    static let name = "journal"
    /// The most unsaved lines whose room is kept for the next batch once they are written.
    static let keptBatchCapacity = 1024
    let folder: StateFolder
    /// The journal, for messages and events.
    let file: URL
    /// The last error while saving, `nil` once a save succeeds again.
    let lastSaveError = Locked<DownloadError?>(nil)
    private let queue = DispatchQueue(label: "Downloader.ReceiptJournal")
    private let onSaveError: @Sendable (DownloadError?) -> Void
    /// Removals noted without a hop onto the queue (`noteRemoval`), numbered in the order noted, and the next number.
    private let noted = Locked<(next: Int, removals: [(number: Int, url: URL, keepsPlacedFile: Bool)])>((0, []))

    // Queue-confined.
    private var fd: Int32 = -1
    /// Bytes in the file (all whole lines).
    private var fileBytes = 0
    /// Where each live download's latest line is in the file, and its place in the order downloads first appeared (a
    /// download removed and asked for again takes a new place, after the others).
    private var index: [String: (range: Range<Int>, place: Int)] = [:]
    /// The place the next download that appears takes.
    private var nextPlace = 0
    private var liveBytes = 0
    /// Placements of verified files written and not yet superseded by a completed line or a removal, and whether each
    /// forgets its download once placed (carried with it).
    private var placements: [String: (placement: JournalEntry.Placement, forgets: Bool)] = [:]
    /// Downloads whose last line is a placement that forgets them once placed (`JournalEntry.forgetsWhenPlaced`).
    private var forgettingPlacements: Set<String> = []
    /// Lines not written yet, in order; a download's newer line replaces its older one in place.
    private var unsaved: [(key: String, line: [UInt8], isRemoval: Bool)?] = []
    private var unsavedPosition: [String: Int] = [:]
    private var syncScheduled = false
    private var retryScheduled = false
    private var isClosed = false
    /// Whether the last report was a failure (`report`).
    private var isFailing = false

    private init(folder: StateFolder, onSaveError: @escaping @Sendable (DownloadError?) -> Void) {
        self.folder = folder
        file = folder.url(of: Self.name, in: .state)
        self.onSaveError = onSaveError
    }

    /// Opens (creating with mode 0600) and reads the journal of a state folder.
    /// - Parameters:
    ///   - folder: the state folder.
    ///   - onSaveError: told when saving starts failing (with the error) and when it works again (`nil`).
    /// - Returns: the journal, the latest entry of each download still present (in the order they first appeared),
    ///   and a description of lines that could not be read (skipped), if any.
    /// - Throws: `DownloadError.fileSystem` when the file cannot be opened, or is a symbolic link.
    static func open(
        _ folder: StateFolder, onSaveError: @escaping @Sendable (DownloadError?) -> Void = { _ in }
    ) throws(DownloadError) -> (journal: ReceiptJournal, entries: [JournalEntry], problem: String?) {
        let journal = ReceiptJournal(folder: folder, onSaveError: onSaveError)
        let file = journal.file
        // Opened before it is read: a journal that is not ours is refused before anything of it is used.
        try journal.openForAppending(truncatingTo: nil)
        let data = journal.readWhole()
        let lines = Lines(data)
        let (decoded, undecodable) = lines.entries(in: data)
        var entries: [JournalEntry] = []
        for line in decoded {
            journal.index[line.key] = (line.range, journal.nextPlace)
            journal.nextPlace += 1
            entries.append(line.entry)
            journal.liveBytes += line.range.count
            if let placement = line.entry.placement {
                let forgets = line.entry.forgetsWhenPlaced == true
                journal.placements[line.key] = (placement, forgets)
                if forgets { journal.forgettingPlacements.insert(line.key) }
            }
        }
        let skipped = lines.keyless + undecodable.count
        let wholeBytes = lines.wholeBytes
        _ = ftruncate(journal.fd, off_t(wholeBytes))  // drops a line torn by a crash
        journal.fileBytes = wholeBytes
        journal.queue.sync { journal.compactIfLarge() }
        let problem = skipped > 0 ? "\(skipped) unreadable line\(skipped == 1 ? "" : "s") in \(file.path) skipped" : nil
        return (journal, entries, problem)
    }

    /// Appends lines without waiting, after the removals noted before; lines given in one call are written with one
    /// `write(2)`.
    func append(_ lines: [JournalLine]) {
        let (count, removalsWait) = noted.withLock { ($0.next, !$0.removals.isEmpty) }
        guard !lines.isEmpty || removalsWait else { return }
        queue.async { [self] in write(lines, after: count) }
    }

    /// Appends lines and returns once they are written (for the placement of a verified file, which must be on record
    /// before the file moves).
    func appendNow(_ lines: [JournalLine]) {
        let count = noted.withLock { $0.next }
        queue.sync { write(lines, after: count) }
    }

    /// Notes a download's removal without waking the journal's queue: it is written before any line handed over after
    /// this call (so a download asked for again does not inherit the removed one's pending placement), with the next
    /// `append`, `appendNow`, `flush` or `close` (the manager's next save: within 10 ms). One thread wake-up and one
    /// `write(2)` a file fewer for a list that forgets each download it finishes (issue #52).
    /// - Parameters:
    ///   - url: the download.
    ///   - keepsPlacedFile: its completed file stays where it was placed: when its last line is a placement that
    ///     forgets it once placed (`JournalEntry.forgetsWhenPlaced`), that line stands for the removal.
    func noteRemoval(_ url: URL, keepsPlacedFile: Bool = false) {
        noted.withLock { noted in
            noted.removals.append((noted.next, url, keepsPlacedFile))
            noted.next += 1
        }
    }

    /// Returns once every line handed over so far, and every removal noted, is written (or has failed and waits for a
    /// retry).
    func flush() {
        let count = noted.withLock { $0.next }
        queue.sync { write([], after: count) }
    }

    /// Rewrites the journal with exactly these entries (taking over an old layout).
    func rewrite(_ entries: [JournalEntry]) {
        queue.sync {
            index = [:]
            liveBytes = 0
            write(entries.map(JournalLine.put), after: 0)
            compact()
        }
    }

    /// Flushes to stable storage and closes the file. Later appends are dropped.
    func close() {
        queue.sync {
            guard !isClosed else { return }
            write([], after: .max)
            if fd >= 0 {
                _ = syncData(fd)
                _ = posixClose(fd)
            }
            fd = -1
            isClosed = true
        }
    }

    // MARK: - Queue

    /// The journal's bytes (only a regular file is read: a device such as /dev/full would never end).
    private func readWhole() -> Data {
        folder.read(Self.name, in: .state) ?? Data()
    }

    /// Opens the journal for appending, cut back to `length` bytes when given (a line torn by a crash is dropped).
    private func openForAppending(truncatingTo length: Int?) throws(DownloadError) {
        let descriptor: Int32
        do {
            descriptor = try folder.openFile(Self.name, in: .state, flags: O_WRONLY | O_CREAT | O_APPEND)
        } catch let error as DownloadError {
            throw error
        } catch let error as POSIXError where error.code == .ELOOP {
            throw .fileSystem(
                file, reason: "\(file.path) is a symbolic link: download state is never reached through one; remove it")
        } catch {
            throw .fileSystem(file, reason: "cannot open \(file.path): \(error.localizedDescription)")
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            _ = posixClose(descriptor)
            throw .fileSystem(file, reason: "\(file.path) is not a regular file")
        }
        _ = fchmod(descriptor, 0o600)
        if fd >= 0 { _ = posixClose(fd) }
        fd = descriptor
        if let length {
            _ = ftruncate(descriptor, off_t(length))
            fileBytes = length
        }
    }

    /// Queues new lines after any that are still unsaved, then writes them all.
    /// - Parameters:
    ///   - lines: the lines.
    ///   - count: the removals noted before these lines were handed over (`noteRemoval`): those go first.
    private func write(_ lines: [JournalLine], after count: Int) {
        guard !isClosed else { return }
        let removals = noted.withLock { noted -> [(url: URL, keepsPlacedFile: Bool)] in
            let due = noted.removals.prefix { $0.number < count }
            noted.removals.removeFirst(due.count)
            return due.map { ($0.url, $0.keepsPlacedFile) }
        }
        // The lines are read where they are: a copy of a put into a new array retains every reference its entry holds
        // (issue #52).
        for removal in removals { add(.remove(removal.url), keepsPlacedFile: removal.keepsPlacedFile) }
        for line in lines { add(line) }
        writeUnsaved()
    }

    /// Adds a line to the unsaved ones, replacing its download's older unsaved line.
    /// - Parameter keepsPlacedFile: for a removal, the download's completed file stays where it was placed.
    private func add(_ line: JournalLine, keepsPlacedFile: Bool = false) {
        let key: String
        let data: [UInt8]
        var isRemoval = false
        switch line {
        case .remove(let url):
            key = url.absoluteString
            placements.removeValue(forKey: key)
            // Its last line, written, forgets it once placed: that line stands for the removal (one line a file of a
            // batch fewer; issue #52). It is no longer live: compaction drops it.
            if forgettingPlacements.remove(key) != nil, keepsPlacedFile, unsavedPosition[key] == nil {
                liveBytes -= index.removeValue(forKey: key)?.range.count ?? 0
                return
            }
            data = line.journalLine(key: key)
            isRemoval = true
        case .put(let entry):
            key = entry.url.absoluteString
            var forgets = entry.placement != nil && entry.forgetsWhenPlaced == true
            if let carried = carryingPlacement(entry, key: key) {
                data = JournalLine.put(carried).journalLine(key: key)
                forgets = carried.forgetsWhenPlaced == true
            } else {
                data = line.journalLine(key: key)
            }
            if forgets {
                forgettingPlacements.insert(key)
            } else if !forgettingPlacements.isEmpty {
                forgettingPlacements.remove(key)
            }
        }
        // One hash of the key a dictionary, not two (each hashes the whole URL; issue #52).
        if let position = unsavedPosition.updateValue(unsaved.count, forKey: key) { unsaved[position] = nil }
        unsaved.append((key, data, isRemoval))
    }

    /// Applies the placement rule: a line carries the pending placement of its download (and whether it forgets the
    /// download once placed) until one supersedes it — a completed line, or a line whose `replaced` file is the placed
    /// one (the move is done, and a newer version is downloading already).
    /// - Returns: the entry with the pending placement when it must carry it; `nil` when it is written as it is.
    private func carryingPlacement(_ entry: JournalEntry, key: String) -> JournalEntry? {
        if let placement = entry.placement {
            placements[key] = (placement, entry.forgetsWhenPlaced == true)
            return nil
        }
        // Most lines have no placement pending: one look-up decides.
        guard let pending = placements[key] else { return nil }
        if entry.state == .completed || (entry.replaced != nil && entry.replaced == pending.placement) {
            placements.removeValue(forKey: key)
            return nil
        }
        var carried = entry
        carried.placement = pending.placement
        if pending.forgets { carried.forgetsWhenPlaced = true }
        return carried
    }

    /// Writes every unsaved line with one `write(2)`; on failure the file is cut back to its last whole line.
    private func writeUnsaved() {
        guard !unsaved.isEmpty, fd >= 0 else { return }
        var batch: [UInt8] = []
        batch.reserveCapacity(unsaved.reduce(0) { $0 + ($1?.line.count ?? 0) })
        for case let item? in unsaved { batch.append(contentsOf: item.line) }
        do {
            try batch.withUnsafeBytes { try AtomicFile.writeAll(fd, $0) }
        } catch {
            _ = ftruncate(fd, off_t(fileBytes))
            report(.fileSystem(file, reason: "cannot save the receipts in \(file.path): \(error.localizedDescription)"))
            scheduleRetry()
            return
        }
        var offset = fileBytes
        for case let item? in unsaved {
            let range = offset..<(offset + item.line.count)
            offset = range.upperBound
            if item.isRemoval {
                liveBytes -= index.removeValue(forKey: item.key)?.range.count ?? 0
            } else {
                // One look-up whether the download is new or not; a constant default captures nothing (a default
                // that captured `range` allocated a closure context for every line).
                place(range, in: &index[item.key, default: (0..<0, -1)])
            }
        }
        fileBytes = offset
        // Small batches keep their room: regrowing it cost each save a rehash (issue #52); a burst's is given back.
        let keepsRoom = unsaved.count <= Self.keptBatchCapacity
        unsaved.removeAll(keepingCapacity: keepsRoom)
        unsavedPosition.removeAll(keepingCapacity: keepsRoom)
        report(nil)
        scheduleSync()
        compactIfLarge()
    }

    /// Records that a download's latest line is at `range`; a download new to the index (`place` -1) takes the next
    /// place.
    private func place(_ range: Range<Int>, in entry: inout (range: Range<Int>, place: Int)) {
        if entry.place < 0 {
            entry.place = nextPlace
            nextPlace += 1
        }
        liveBytes += range.count - entry.range.count
        entry.range = range
    }

    private func report(_ error: DownloadError?) {
        // A save after a save: nothing to report, and no lock taken (each write reports; issue #52).
        guard error != nil || isFailing else { return }
        isFailing = error != nil
        let changed = lastSaveError.withLock { last -> Bool in
            defer { last = error }
            return (last == nil) != (error == nil)
        }
        if changed { onSaveError(error) }
    }

    private func scheduleSync() {
        guard !syncScheduled else { return }
        syncScheduled = true
        queue.asyncAfter(deadline: .now() + 1) { [self] in
            syncScheduled = false
            if fd >= 0 { _ = syncData(fd) }
        }
    }

    private func scheduleRetry() {
        guard !retryScheduled else { return }
        retryScheduled = true
        queue.asyncAfter(deadline: .now() + 1) { [self] in
            retryScheduled = false
            writeUnsaved()
        }
    }

    /// Compacts once the file is more than twice its live lines (and at least 256 KiB): each line is copied a bounded
    /// number of times, so the cost is amortised O(1) per change.
    private func compactIfLarge() {
        guard fd >= 0, fileBytes > 256 << 10, fileBytes > 2 * liveBytes else { return }
        compact()
    }

    /// Atomically replaces the file with each live download's latest line, copied as bytes (nothing is decoded).
    private func compact() {
        let data = readWhole()
        // The bytes are copied into one buffer: a `Data.append` a line cost 1,200 instructions (issue #52). Only live
        // downloads are visited, in their places: removed ones cost nothing here (issue #52). They are reached by
        // their positions in the index, which is changed in place: no key is hashed again (a new index hashed every
        // live URL at each compaction, about 7,000 instructions a file of a long list; issue #52).
        var live = Array(index.indices)
        live.sort { index.values[$0].place < index.values[$1].place }
        var content: [UInt8] = []
        content.reserveCapacity(liveBytes)
        var moved: [(position: Dictionary<String, (range: Range<Int>, place: Int)>.Index, range: Range<Int>)] = []
        moved.reserveCapacity(live.count)
        data.withUnsafeBytes { bytes in
            for position in live {
                let range = index.values[position].range
                guard range.upperBound <= bytes.count else { continue }
                moved.append((position, content.count..<(content.count + range.count)))
                content.append(contentsOf: bytes[range])
            }
        }
        do {
            try folder.write(Data(content), to: Self.name, in: .state, durable: true)
        } catch {
            report(
                .fileSystem(file, reason: "cannot rewrite the receipts in \(file.path): \(error.localizedDescription)"))
            return
        }
        try? openForAppending(truncatingTo: content.count)
        // A line that was not in the file (never expected) is dropped from the index, as it is from the file.
        let lost = moved.count == live.count ? [] : Set(live).subtracting(moved.map(\.position)).map { index.keys[$0] }
        for (position, range) in moved { index.values[position].range = range }
        for key in lost { index[key] = nil }
        liveBytes = content.count
    }
}

@inline(__always)
private func posixClose(_ fd: Int32) -> Int32 {
    close(fd)
}

extension ReceiptJournal {
    /// A journal's bytes split into lines without decoding them: each download's latest line, in the order the
    /// downloads first appeared. A value, read by the manager that opens the journal and by `dl --list`, which reads it
    /// without the lock.
    struct Lines: Sendable {
        /// Keys in the order they first appeared.
        private(set) var order: [String] = []
        /// The byte range of each key's latest line, its newline included.
        private(set) var ranges: [String: Range<Int>] = [:]
        /// Keys whose latest line is a removal.
        private(set) var removed: Set<String> = []
        /// Bytes up to the end of the last whole line: a last line without its newline was torn by a crash.
        private(set) var wholeBytes = 0
        /// Whole lines without a key (no tab).
        private(set) var keyless = 0

        /// Splits `data` into lines.
        init(_ data: Data) {
            data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
                guard let base = bytes.baseAddress else { return }
                func find(_ byte: UInt8, from: Int, to: Int) -> Int? {
                    memchr(base + from, Int32(byte), to - from).map { $0 - UnsafeMutableRawPointer(mutating: base) }
                }
                var start = 0
                while start < bytes.count {
                    guard let newline = find(0x0a, from: start, to: bytes.count) else { break }  // torn: dropped
                    defer { start = newline + 1 }
                    wholeBytes = newline + 1
                    guard let tab = find(0x09, from: start, to: newline) else {
                        keyless += 1
                        continue
                    }
                    let key = String(decoding: bytes[start..<tab], as: UTF8.self)
                    if ranges[key] == nil { order.append(key) }
                    ranges[key] = start..<(newline + 1)
                    // A removal line is recognised without decoding: `{"remove":…}`.
                    if bytes[(tab + 1)...].starts(with: Array(#"{"remove""#.utf8)) {
                        removed.insert(key)
                    } else {
                        removed.remove(key)
                    }
                }
            }
        }

        /// One download's latest line, decoded.
        struct Entry {
            let key: String
            let entry: JournalEntry
            /// Its line's byte range in the journal.
            let range: Range<Int>
        }

        /// Decodes the latest line of each download that was not removed.
        /// - Parameter data: the bytes these lines were split from.
        /// - Returns: the entries in first-appearance order, and the keys whose line could not be decoded.
        func entries(in data: Data) -> (entries: [Entry], undecodable: [String]) {
            let decoder = JSONDecoder()
            var entries: [Entry] = []
            var undecodable: [String] = []
            for key in order {
                guard let range = ranges[key], !removed.contains(key) else { continue }
                let json = data[(data[range].firstIndex(of: 0x09)! + 1)..<(range.upperBound - 1)]
                guard case .put(let entry)? = try? decoder.decode(JournalLine.self, from: json) else {
                    undecodable.append(key)
                    continue
                }
                entries.append(Entry(key: key, entry: entry, range: range))
            }
            return (entries, undecodable)
        }
    }
}
