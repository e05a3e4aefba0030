import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension DownloadManager {
    /// Continues every download that its process interrupted (`DownloadReceipt.isInterrupted`: a shutdown, a signal, a
    /// crash or `kill -9` stopped it), in the order they were first requested, queued like `resume(_:)`. Downloads a
    /// caller suspended stay suspended, and so do downloads asked with credentials that are never saved (a URL user
    /// or password, an `Authorization` or `Cookie` header) until a request gives them again. A manager made with
    /// `Configuration.continuesInterruptedDownloads` calls it when it opens its directory.
    public func resumeInterrupted() {
        for url in book.keys where machine.isInterrupted(url) && book[url]?.needsCredentials == false {
            apply(machine.resume(url))
        }
    }

    /// What a manager finds when it opens its directory.
    struct Recovered {
        let journal: ReceiptJournal
        let records: [ReceiptRecord]
        /// What was dropped or skipped, if anything.
        let problem: DownloadError?
    }

    /// Opens the state a previous manager left (after a clean stop, a crash or `kill -9`) and makes it true again:
    /// an old layout is taken over; temporary files of interrupted writes go; every journal entry is checked (a
    /// completed file must be a plain name inside the completed area, or the entry is dropped and reported); a
    /// verified file that was being moved when the process died is found where it went; downloads that were waiting
    /// or running come back suspended with the length their partial file really has; partial files that belong to
    /// no unfinished download are deleted. Call with the directory lock held.
    /// - Throws: `DownloadError.fileSystem` when the journal cannot be opened.
    static func recover(
        _ directory: DownloadDirectory, onSaveError: @escaping @Sendable (DownloadError?) -> Void
    ) throws(DownloadError) -> Recovered {
        directory.state.removeTemporaryFiles(in: .state)
        directory.state.removeTemporaryFiles(in: .partial)
        AtomicFile.removeOrphans(in: directory.completedArea)
        let legacy = LegacyState.migrate(directory)
        let (journal, saved, unreadable) = try ReceiptJournal.open(directory.state, onSaveError: onSaveError)
        var entries = legacy.entries + saved
        if entries.contains(where: \.holdsSecrets) {
            // Saved by an earlier version with credentials: files taken over, the journal rewritten without them.
            for entry in entries where entry.url.hasCredentials { takeOverFiles(of: entry.url, in: directory) }
            entries = entries.map { $0.withoutSecrets() }
            journal.rewrite(entries)
        } else if !legacy.entries.isEmpty {
            journal.rewrite(entries)
        }

        var problems = legacy.problems + (unreadable.map { [$0] } ?? [])
        var order: [URL] = []
        var byURL: [URL: ReceiptRecord] = [:]
        for entry in entries {  // the journal's entry wins over the old file's
            if isPlacedAndForgotten(entry, in: directory) {
                // A batch's download whose file was placed: forgotten, as its manager would have done next.
                if byURL.removeValue(forKey: entry.url) != nil { order.removeAll { $0 == entry.url } }
                journal.noteRemoval(entry.url, keepsPlacedFile: true)
                continue
            }
            switch record(from: entry, in: directory) {
            case .success(let record):
                if byURL.updateValue(record, forKey: entry.url) == nil { order.append(entry.url) }
            case .failure(let problem):
                problems.append(problem.reason)
            }
        }
        let records = claimFiles(order.compactMap { byURL[$0] }, in: directory, problems: &problems)
        sweepOrphans(directory, keeping: records)
        let problem =
            problems.isEmpty
            ? nil
            : DownloadError.corruptReceipts(
                directory.journalFile, reason: "dropped or skipped: " + problems.joined(separator: "; "))
        return Recovered(journal: journal, records: records, problem: problem)
    }

    /// Claims each completed file for its download (`FileClaims`). Journals of earlier versions could record one
    /// file for two downloads (identical files of two URLs): the first keeps it, the others are known again without a
    /// file (`.idle`: a request downloads them), so that removing one never deletes the other's file.
    private static func claimFiles(
        _ records: [ReceiptRecord], in directory: DownloadDirectory, problems: inout [String]
    ) -> [ReceiptRecord] {
        records.map { record in
            let url = record.receipt.url
            guard record.receipt.state == .completed || record.replacesCompletedFile,
                !directory.claims.claim(record.receipt.fileURL, for: url)
            else { return record }
            let owner = directory.claims.owner(of: record.receipt.fileURL)
            problems.append(
                "\(url.redactedAbsoluteString) shared \(record.receipt.fileURL.lastPathComponent) with "
                    + "\(owner?.redactedAbsoluteString ?? "another download"): it downloads again when asked")
            var shared = record
            let key = DownloadDirectory.key(for: url)
            shared.receipt = DownloadReceipt(url: url, file: directory.receiptFile(key: key, url: url), state: .idle)
            shared.suggestedFilename = nil
            shared.replacesCompletedFile = false
            return shared
        }
    }

    /// Moves the partial file and state an earlier version saved for a URL with credentials (keyed by the whole
    /// URL) to the key of the URL without them, and saves the state again without the credentials.
    private static func takeOverFiles(of url: URL, in directory: DownloadDirectory) {
        let old = DownloadDirectory.legacyKey(for: url)
        let files = PartialFiles(folder: directory.state, url: url)
        guard old != files.key else { return }
        for suffix in [".part", ".state"] where directory.state.status(files.key + suffix, in: .partial) == nil {
            guard directory.state.status(old + suffix, in: .partial) != nil else { continue }
            let target = directory.state.url(of: files.key + suffix, in: .partial)
            _ = directory.state.move(old + suffix, in: .partial, to: target)
        }
        if case .valid(let state) = files.loadState() { try? files.saveState(state) }  // saved with its URL stripped
    }

    private struct Dropped: Error {
        let reason: String
    }

    /// The record of a journal entry, checked against the directory.
    private static func record(from entry: JournalEntry, in directory: DownloadDirectory) -> Result<
        ReceiptRecord, Dropped
    > {
        let url = entry.url
        guard (try? url.validateForDownload()) != nil else {
            return .failure(Dropped(reason: "\(url.redactedAbsoluteString) is not an http(s) URL"))
        }
        let partial = PartialFiles(folder: directory.state, url: url)
        var receipt = DownloadReceipt(
            url: url, file: directory.receiptFile(key: partial.key, url: url), state: entry.state,
            totalBytesExpectedToWrite: entry.totalBytesExpected, error: entry.error)
        var state = entry.state
        var filename = entry.filename
        var checksum = entry.checksum
        var verification = entry.verification
        if let placement = entry.placement, placement != entry.replaced {  // equal: that move was done
            guard let target = directory.completedFile(named: placement.name, destination: entry.options.destination)
            else {
                return .failure(Dropped(reason: "\(url.redactedAbsoluteString) was placed outside the completed area"))
            }
            // A relocation (`Relocation.Move`) records where the completed file was (`replaced`, another name): its
            // source is that file, not the partial file, which may be a newer version's that a later request started.
            let relocated = entry.replaced.flatMap { $0.name != placement.name ? $0 : nil }
            if let relocated {
                if isIntact(target, length: placement.length, checksum: placement.checksum) {
                    state = .completed
                    filename = placement.name
                    checksum = placement.checksum
                    receipt.totalBytesExpectedToWrite = placement.length
                } else if entry.options.destination == nil, let old = directory.completedFile(named: relocated.name),
                    isIntact(old, length: relocated.length, checksum: nil)
                {
                    // The move did not happen: it is still the completed file, at its old name.
                    state = .completed
                    filename = relocated.name
                    checksum = relocated.checksum
                    receipt.totalBytesExpectedToWrite = relocated.length
                } else {
                    state = .suspended
                }
            } else if isPlaced(partial, at: target, length: placement.length, checksum: placement.checksum) {
                partial.removeState()
                state = .completed
                filename = placement.name
                checksum = placement.checksum
                verification = placement.checksum.map(Verification.computed) ?? .lengthOnly
                receipt.totalBytesExpectedToWrite = placement.length
            } else {
                state = .suspended  // the move did not happen: the verified partial file is still there
            }
        }
        switch state {
        case .completed:
            guard let name = filename,
                let file = directory.completedFile(named: name, destination: entry.options.destination)
            else {
                return .failure(
                    Dropped(
                        reason:
                            "\(url.redactedAbsoluteString) points outside the completed area (\(filename ?? "no name"))"
                    ))
            }
            receipt.file = ReceiptFile(url: file, name: name)
            receipt.checksum = checksum
            receipt.verification = verification
            receipt.totalBytesWritten =
                receipt.totalBytesExpectedToWrite ?? FileManager.default.sizeOfItem(at: file) ?? 0
            receipt.totalBytesExpectedToWrite = receipt.totalBytesWritten
        case .queued, .downloading, .suspended, .idle, .failed:
            if state == .queued || state == .downloading { state = .suspended }
            receipt.totalBytesWritten = partial.partialSize ?? 0
        }
        receipt.state = state
        // Stopped by its process, not by a caller: left waiting or running (a crash, `kill -9`, a placement cut), or
        // suspended by a shutdown.
        receipt.isInterrupted =
            state == .suspended
            && (entry.state == .queued || entry.state == .downloading || entry.interrupted == true)
        var record = ReceiptRecord(
            receipt: receipt, options: entry.options, suggestedFilename: entry.suggestedFilename,
            savedExpectations: entry.expectations, needsCredentials: entry.credentialsNotSaved == true)
        if state == .suspended, let replaced = entry.replaced,
            let file = directory.completedFile(named: replaced.name, destination: entry.options.destination),
            FileManager.default.sizeOfItem(at: file) == replaced.length
        {
            // A newer version was downloading: the verified file it would replace is still the download's.
            record.replacesCompletedFile = true
            record.receipt.file = ReceiptFile(url: file, name: replaced.name)
            record.receipt.checksum = replaced.checksum
            record.receipt.verification = entry.verification ?? replaced.checksum.map(Verification.computed)
            record.receipt.totalBytesWritten = replaced.length
            record.receipt.totalBytesExpectedToWrite = replaced.length
        }
        return .success(record)
    }

    /// Whether `entry` is a placement line that forgets its download once placed (`JournalEntry.forgetsWhenPlaced`)
    /// and the verified partial file is gone: moved to its name (whatever became of the file since: a user may have
    /// deleted it, and a forgotten download stays forgotten), or a second name of the placed file (the move cut
    /// between `link` and `unlink`), removed now. Nothing is hashed. A move that did not happen leaves the verified
    /// partial file, which `record(from:in:)` finds as usual (the download comes back suspended, its file kept).
    private static func isPlacedAndForgotten(_ entry: JournalEntry, in directory: DownloadDirectory) -> Bool {
        guard entry.forgetsWhenPlaced == true, let placement = entry.placement, placement != entry.replaced else {
            return false
        }
        let partial = PartialFiles(folder: directory.state, url: entry.url)
        guard partial.folder.status(partial.partialName, in: .partial) != nil else { return true }
        // The partial file is there: placed only if it is a second name of the target (`isPlaced` removes it then).
        guard let target = directory.completedFile(named: placement.name, destination: entry.options.destination)
        else { return false }
        return isPlaced(partial, at: target, length: placement.length, checksum: nil)
    }

    /// Whether `file` is a regular file (not a link to one) of `length` bytes, with `checksum` when one is given.
    private static func isIntact(_ file: URL, length: Int64, checksum: Checksum?) -> Bool {
        var info = stat()
        guard lstat(file.path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, Int64(info.st_size) == length else {
            return false
        }
        guard let checksum else { return true }
        return (try? FileDigest.checksum(of: file, algorithm: checksum.algorithm)) == checksum
    }

    /// Whether a verified partial file reached `target`: it is gone and the target has its length and checksum, or
    /// the move was cut between `link` and `unlink` (both names on one inode: the partial name is removed now).
    private static func isPlaced(_ partial: PartialFiles, at target: URL, length: Int64, checksum: Checksum?) -> Bool {
        var targetInfo = stat()
        guard lstat(target.path, &targetInfo) == 0, (targetInfo.st_mode & S_IFMT) == S_IFREG,
            Int64(targetInfo.st_size) == length
        else { return false }
        guard let partialInfo = partial.folder.status(partial.partialName, in: .partial) else {
            guard let checksum else { return true }
            return (try? FileDigest.checksum(of: target, algorithm: checksum.algorithm)) == checksum
        }
        guard partialInfo.st_ino == targetInfo.st_ino && partialInfo.st_dev == targetInfo.st_dev else { return false }
        partial.removePartial()
        return true
    }

    /// Deletes partial files and saved states that belong to no unfinished download (left by a crash between a move
    /// and its clean-up, or by a download that was removed). Only names of the form this package writes
    /// (`KEY.part`, `KEY.state`, KEY 32 hex digits) are candidates: anything else in the folder is not ours and stays.
    private static func sweepOrphans(_ directory: DownloadDirectory, keeping records: [ReceiptRecord]) {
        let unfinished = Set(
            records.filter { $0.receipt.state != .completed }.map { DownloadDirectory.key(for: $0.receipt.url) })
        for name in directory.state.names(in: .partial) {
            guard let key = DownloadDirectory.key(ofPartialName: name), !unfinished.contains(key) else { continue }
            directory.state.remove(name, in: .partial)
        }
    }
}
