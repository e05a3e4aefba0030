import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A caller's request on its way to the state machine: validated; for a completed download, its file looked at and
/// moved where the request's options put it, off the actor.
extension DownloadManager {
    /// The download a URL names: the key of the URL without its credentials (a download's identity), hashed once here
    /// for every table the request touches. Credentials are kept in memory for its requests, the latest asked.
    func identify(_ url: URL) -> DownloadKey {
        let plain = url.withoutCredentials
        let key = DownloadKey(plain)
        if plain != url { credentialedURLs[key] = url }
        return key
    }

    /// A new number for a waiter or a request (`Machine.WaiterID`, `Machine.RequestID`).
    func makeNumber() -> Int {
        lastNumber += 1
        return lastNumber
    }

    /// What a request for `url` with `options` would be refused for if it were made now, without making it: what
    /// `download(_:options:)` would throw at once and `enqueue`'s completion get at once — `DownloadError.shutDown`,
    /// `DownloadError.conflictingOptions` (another destination or file name than a download underway),
    /// `DownloadError.checksumConflict` (another checksum of the same algorithm), or a request that is not valid
    /// (`DownloadError.invalidURL`, `DownloadError.invalidChecksum`, a destination that is not a file path, inside
    /// the state folder or another download's file; a destination that is a folder fails the download when it
    /// starts, as the file system is not read here). For a service that must answer its own client before the
    /// request goes on (aria2's `addUri`).
    /// - Parameters:
    ///   - url: what would be downloaded.
    ///   - options: the request's options.
    /// - Returns: the error, `nil` when the request would be taken (started, joined or continued).
    public func refusal(ofRequestFor url: URL, options: DownloadOptions = DownloadOptions()) -> DownloadError? {
        let key = DownloadKey(url.withoutCredentials)
        let expectation: Checksum?
        do throws(DownloadError) {
            if let openError { throw openError }
            try key.url.validateForDownload()
            expectation = try options.expectation()
            try validateDestination(options.destination, of: key.url)
        } catch {
            return error
        }
        let contradiction = book.update(key) { options.contradiction(joining: $0.options) } ?? nil  // no record copy
        return machine.refusal(of: key, expectation: expectation, contradiction: contradiction).map {
            error(for: $0, of: key)
        }
    }

    /// One caller's request: validated, a completed file moved if its naming or destination changed, then handed to
    /// the machine.
    /// - Parameter forgetsWhenAnswered: the waiter is a batch's (see `Machine.request`).
    func request(
        _ key: DownloadKey, options: DownloadOptions, waiter: Machine.WaiterID?, forgetsWhenAnswered: Bool = false
    ) {
        if machine.isShuttingDown {  // no receipt for a request that cannot start any more
            return apply(
                machine.request(
                    key, id: makeNumber(), expectation: nil, waiter: waiter, forgetsWhenAnswered: forgetsWhenAnswered))
        }
        openRecord(key, options: options)
        var expectation: Checksum?
        do throws(DownloadError) {
            if let openError { throw openError }
            try key.url.validateForDownload()
            expectation = try options.expectation()
            try validateDestination(options.destination, of: key.url)
        } catch {
            apply(machine.reject(key, error: error, waiter: waiter), requestOptions: options)
            return
        }
        // Only a request with an expectation changes the kept ones without a change of state (which saves anyway).
        let expectations = expectation == nil ? nil : machine.expectations(of: key)
        let contradiction = book.update(key) { options.contradiction(joining: $0.options) } ?? nil  // no record copy
        apply(
            machine.request(
                key, id: makeNumber(), expectation: expectation, priority: options.priority, waiter: waiter,
                contradiction: contradiction, forgetsWhenAnswered: forgetsWhenAnswered),
            requestOptions: options)
        // An expectation that joined is part of the download's saved state at once.
        if let expectations, machine.expectations(of: key) != expectations { persist(key) }
    }

    /// A destination must be a file path outside the state folder, and not another download's file. (That it is not
    /// a folder is checked off the actor, where the file work is: before a transfer starts, before a completed file
    /// moves; `FilePlacement.folderRefusal`.)
    func validateDestination(_ destination: URL?, of url: URL) throws(DownloadError) {
        guard let destination else { return }
        guard destination.isFileURL, !destination.path.hasSuffix("/") else {
            throw .fileSystem(url, reason: "the destination \(destination.absoluteString) is not a file path")
        }
        let state = directory.stateArea.standardizedFileURL.path + "/"
        guard !destination.standardizedFileURL.path.hasPrefix(state) else {
            throw .fileSystem(url, reason: "the destination \(destination.path) is inside the state folder")
        }
        if let owner = directory.claims.owner(of: destination), owner != url {
            throw .fileSystem(
                url,
                reason:
                    "the destination \(destination.path) is the file of another download (\(owner.redactedAbsoluteString)); "
                    + "remove or forget that one first")
        }
    }

    func cancelWaiter(_ id: Machine.WaiterID, of key: DownloadKey) {
        apply(machine.cancelWaiter(id, of: key))
    }

    /// What the actor keeps of a request the machine holds: its options, and the URL with the credentials it was
    /// asked with (a removal held before it forgets the download's).
    struct HeldRequest: Sendable {
        var options: DownloadOptions
        var credentialedURL: URL?
    }

    /// Makes the download's record when it has none (a new download, or one a removal forgot), and marks a record
    /// whose requests carry credentials.
    func openRecord(_ key: DownloadKey, options: DownloadOptions) {
        if !book.contains(key) {
            let identifier = DownloadDirectory.key(for: key.url)
            book[key] = ReceiptRecord(
                receipt: freshReceipt(for: key, identifier: identifier), options: options, identifier: identifier)
        }
        if (!credentialedURLs.isEmpty && credentialedURLs[key] != nil) || options.carriesSecretHeader {
            book.update(key) { $0.needsCredentials = true }
        }
    }

    /// A receipt for a download that has no file yet.
    /// - Parameter identifier: `DownloadDirectory.key(for: key.url)`, when the caller has it already.
    func freshReceipt(for key: DownloadKey, identifier: String? = nil) -> DownloadReceipt {
        let name = identifier ?? DownloadDirectory.key(for: key.url)
        return DownloadReceipt(url: key.url, file: directory.receiptFile(key: name, url: key.url))
    }

    /// Looks at a completed file off the actor (still there with its recorded size?) and, when it is, puts it where
    /// the held request's explicit naming or destination asks; then reports to the machine. On the file-work queue:
    /// after the clean-ups queued before it, before any queued after.
    func inspectCompletedFile(_ key: DownloadKey, request id: Machine.RequestID) {
        let file = machine.completedFile(of: key)
        let plan = file.flatMap { relocation(of: key, file: $0, for: heldRequests[id]?.options ?? DownloadOptions()) }
        let fileWork = self.fileWork
        inspections[id] = Task { [weak self] in
            let outcome = await fileWork.run { () -> Inspection in
                guard let file, FileManager.default.sizeOfItem(at: file.url) == file.length else { return .gone }
                guard let move = plan?.move else { return .intact }
                do throws(DownloadError) {
                    return .moved(try move.carryOut())
                } catch {
                    return .unplaced(error)
                }
            }
            await self?.completedFileInspected(key, request: id, outcome, relocation: plan)
        }
    }

    /// What looking at a completed file found.
    enum Inspection: Sendable {
        /// Gone, or not the recorded size: it is not the download's any more.
        case gone
        /// There, and where the request asks.
        case intact
        /// There, and moved (or copied) to this file.
        case moved(URL)
        /// There, but it could not be put where the request asks, for this reason: it stays as it was.
        case unplaced(DownloadError)
    }

    private func completedFileInspected(
        _ key: DownloadKey, request id: Machine.RequestID, _ outcome: Inspection, relocation: Relocation?
    ) {
        inspections[id] = nil
        var movedTo: URL?
        if let relocation, var record = book[key], let file = machine.completedFile(of: key) {
            switch outcome {
            case .gone, .unplaced: break
            case .intact, .moved:
                record.options.naming = relocation.options.naming
                record.options.destination = relocation.options.destination
                if case .moved(let moved) = outcome {
                    if moved != file.url { directory.claims.release(file.url, of: key.url) }
                    movedTo = moved
                    record.receipt.file = ReceiptFile(url: moved, name: moved.lastPathComponent)
                }
                let movedFile = book[key]?.receipt != record.receipt
                book[key] = record
                persist(key)
                // The state is the same: the receipt changed otherwise.
                if movedFile { emit(.progress(record.receipt)) }
            }
        }
        let expectations = machine.expectations(of: key)
        switch outcome {
        case .gone: apply(machine.completedFileInspected(key, request: id, intact: false))
        case .intact, .moved: apply(machine.completedFileInspected(key, request: id, intact: true, movedTo: movedTo))
        case .unplaced(let error):
            apply(machine.completedFileInspected(key, request: id, intact: true, unplaced: error))
        }
        // An expectation that joined is part of the download's saved state at once.
        if book.contains(key), machine.expectations(of: key) != expectations { persist(key) }
    }

    /// Where a request's explicit naming or destination puts a completed file (no network: it is the same file): a
    /// file in the completed area moves, a file at an earlier destination stays and the new place gets a copy.
    /// Options that choose neither, or choose what the download has, move nothing (`nil`).
    private func relocation(of key: DownloadKey, file: CompletedFile, for requested: DownloadOptions) -> Relocation? {
        guard requested.chosenNaming != nil || requested.destination != nil, let record = book[key] else { return nil }
        var options = record.options
        options.destination = requested.destination
        if let naming = requested.chosenNaming { options.naming = naming }
        guard options.destination != record.options.destination || options.naming != record.options.naming else {
            return nil
        }
        let target = directory.placementTarget(for: options, url: key.url, suggested: record.suggestedFilename)
        let inPlace: Bool
        switch target {
        case .replace(let path):
            inPlace = path.standardizedFileURL == file.url.standardizedFileURL
        case .unique(let area, let name):
            inPlace =
                name == file.url.lastPathComponent
                && area.standardizedFileURL == file.url.deletingLastPathComponent().standardizedFileURL
        }
        guard !inPlace else { return Relocation(options: options, move: nil) }
        var placed = record.options
        placed.naming = options.naming
        placed.destination = options.destination
        let entry = JournalEntry(
            placing: key.url, options: placed, expectations: machine.expectations(of: key), name: "",
            length: file.length, checksum: record.receipt.checksum, suggested: record.suggestedFilename)
        // A file at a destination the caller chose stays theirs: the new place gets a copy. A file in the completed
        // area (the manager's) moves.
        let move = Relocation.Move(
            url: key.url, file: file, target: target, keepsOldFile: record.options.destination != nil, entry: entry,
            journal: journal, claims: directory.claims)
        return Relocation(options: options, move: move)
    }

    /// A completed file's new naming or destination, and the move it needs (`nil`: it is where they put it).
    struct Relocation: Sendable {
        let options: DownloadOptions
        let move: Move?

        /// Moving (or copying) a completed file to its new place, journaled before it moves.
        struct Move: Sendable {
            let url: URL
            let file: CompletedFile
            let target: FilePlacement.Target
            let keepsOldFile: Bool
            /// The journal line to write once the new name is claimed (its `name` is filled in then).
            let entry: JournalEntry
            let journal: ReceiptJournal?
            let claims: FileClaims

            /// Moves or copies the file (on the file-work queue).
            /// - Returns: where the file is now.
            /// - Throws: `DownloadError.fileSystem` when it cannot be put there; it stays as it was.
            func carryOut() throws(DownloadError) -> URL {
                if case .replace(let path) = target, entry.options.destination != nil {
                    if let refusal = FilePlacement.folderRefusal(at: path, downloadURL: url) { throw refusal }
                    try? FileManager.default.createDirectory(
                        at: path.deletingLastPathComponent(), withIntermediateDirectories: true)
                }
                var source = file.url
                if keepsOldFile {
                    let folder: URL
                    switch target {
                    case .replace(let path): folder = path.deletingLastPathComponent()
                    case .unique(let area, _): folder = area
                    }
                    source = folder.appendingPathComponent(".downloader-copy-\(UUID().uuidString)")
                    do {
                        try FileManager.default.copyItem(at: file.url, to: source)
                    } catch {
                        throw .fileSystem(url, reason: "could not copy \(file.url.path) to \(folder.path): \(error)")
                    }
                }
                defer { if source != file.url { try? FileManager.default.removeItem(at: source) } }
                return try FilePlacement.place(
                    .file(source), at: target, length: file.length, checksum: entry.placement?.checksum,
                    downloadURL: url, claims: claims,
                    willClaim: { _, name in
                        var line = entry
                        line.placement?.name = name
                        // Where the file is until it moves: a crash before the move finds it there.
                        line.replaced = .init(
                            name: file.url.lastPathComponent, length: file.length, checksum: entry.placement?.checksum)
                        journal?.appendNow([.put(line)])
                    }
                ).file
            }
        }
    }
}
