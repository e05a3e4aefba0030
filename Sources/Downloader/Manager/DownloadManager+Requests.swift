import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A caller's request on its way to the state machine: validated, a completed file moved where its options put it.
extension DownloadManager {
    /// The download a URL names: the URL without its credentials (a download's identity). Credentials are kept in
    /// memory for its requests, the latest asked.
    func identify(_ url: URL) -> URL {
        let key = url.withoutCredentials
        if key != url { credentialedURLs[key] = url }
        return key
    }

    func makeWaiterID() -> Machine.WaiterID {
        nextWaiterID += 1
        return nextWaiterID
    }

    /// What a request for `url` with `options` would be refused for if it were made now, without making it: what
    /// `download(_:options:)` would throw at once and `enqueue`'s completion get at once — `DownloadError.shutDown`,
    /// `DownloadError.conflictingOptions` (another destination or file name than a download underway),
    /// `DownloadError.checksumConflict` (another checksum of the same algorithm), or a request that is not valid
    /// (`DownloadError.invalidURL`, `DownloadError.invalidChecksum`, a destination that cannot be used). For a
    /// service that must answer its own client before the request goes on (aria2's `addUri`).
    /// - Parameters:
    ///   - url: what would be downloaded.
    ///   - options: the request's options.
    /// - Returns: the error, `nil` when the request would be taken (started, joined or continued).
    public func refusal(ofRequestFor url: URL, options: DownloadOptions = DownloadOptions()) -> DownloadError? {
        let url = url.withoutCredentials
        let expectation: Checksum?
        do throws(DownloadError) {
            if let openError { throw openError }
            try url.validateForDownload()
            expectation = try options.expectation()
            try validateDestination(options.destination, of: url)
        } catch {
            return error
        }
        let contradiction = book[url].flatMap { options.contradiction(joining: $0.options) }
        return machine.refusal(of: url, expectation: expectation, contradiction: contradiction).map {
            error(for: $0, of: url)
        }
    }

    /// One caller's request: validated, a completed file moved if its naming or destination changed, then handed to
    /// the machine.
    func request(_ url: URL, options: DownloadOptions, waiter: Machine.WaiterID?) {
        if machine.isShuttingDown {  // no receipt for a request that cannot start any more
            return apply(machine.request(url, expectation: nil, waiter: waiter, completedFileIsIntact: false))
        }
        if book[url] == nil { book[url] = ReceiptRecord(receipt: freshReceipt(for: url), options: options) }
        if (!credentialedURLs.isEmpty && credentialedURLs[url] != nil) || options.carriesSecretHeader {
            book[url]?.needsCredentials = true
        }
        var expectation: Checksum?
        do throws(DownloadError) {
            if let openError { throw openError }
            try url.validateForDownload()
            expectation = try options.expectation()
            try validateDestination(options.destination, of: url)
        } catch {
            apply(machine.reject(url, error: error, waiter: waiter), requestOptions: options)
            return
        }
        let intact = machine.phase(of: url) == .completed && completedFileIsIntact(url)
        if intact { relocate(url, for: options) }
        // Only a request with an expectation changes the kept ones without a change of state (which saves anyway).
        let expectations = expectation == nil ? nil : machine.expectations(of: url)
        let contradiction = book[url].flatMap { options.contradiction(joining: $0.options) }
        apply(
            machine.request(
                url, expectation: expectation, priority: options.priority, waiter: waiter,
                completedFileIsIntact: intact, contradiction: contradiction),
            requestOptions: options)
        // An expectation that joined is part of the download's saved state at once.
        if let expectations, machine.expectations(of: url) != expectations { persist(url) }
    }

    /// A destination must be a file path outside the state folder, not a folder.
    func validateDestination(_ destination: URL?, of url: URL) throws(DownloadError) {
        guard let destination else { return }
        guard destination.isFileURL, !destination.path.hasSuffix("/") else {
            throw .fileSystem(url, reason: "the destination \(destination.absoluteString) is not a file path")
        }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: destination.path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw .fileSystem(url, reason: "the destination \(destination.path) is a folder")
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

    func cancelWaiter(_ id: Machine.WaiterID, of url: URL) {
        apply(machine.cancelWaiter(id, of: url))
    }

    /// A receipt for a download that has no file yet.
    func freshReceipt(for url: URL) -> DownloadReceipt {
        let key = DownloadDirectory.key(for: url)
        return DownloadReceipt(
            url: url, filename: DownloadDirectory.defaultFilename(for: url, key: key),
            fileURL: directory.partialFile(key: key))
    }

    /// Whether a completed download's file is still there with its recorded size.
    func completedFileIsIntact(_ url: URL) -> Bool {
        guard let file = completedFiles[url] else { return false }
        return FileManager.default.sizeOfItem(at: file.url) == file.length
    }

    /// Puts a completed file where a request's explicit naming or destination asks (no network: it is the same
    /// file): a file in the completed area moves, a file at an earlier destination stays and the new place gets a
    /// copy. Options that choose neither never move a file.
    func relocate(_ url: URL, for requested: DownloadOptions) {
        guard requested.chosenNaming != nil || requested.destination != nil else { return }
        guard var record = book[url], let file = completedFiles[url] else { return }
        var options = record.options
        options.destination = requested.destination
        if let naming = requested.chosenNaming { options.naming = naming }
        guard options.destination != record.options.destination || options.naming != record.options.naming else {
            return
        }
        // A file at a destination the caller chose stays theirs: the new place gets a copy. A file in the completed
        // area (the manager's) moves.
        let keepsOldFile = record.options.destination != nil
        record.options.naming = options.naming
        record.options.destination = options.destination
        let target = directory.placementTarget(for: options, url: url, suggested: record.suggestedFilename)
        let inPlace: Bool
        switch target {
        case .replace(let path):
            inPlace = path.standardizedFileURL == file.url.standardizedFileURL
        case .unique(let area, let name):
            inPlace =
                name == file.url.lastPathComponent
                && area.standardizedFileURL == file.url.deletingLastPathComponent().standardizedFileURL
        }
        if !inPlace {
            if let destination = options.destination {
                try? FileManager.default.createDirectory(
                    at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
            }
            let placed = record.options
            let suggested = record.suggestedFilename
            let checksum = record.receipt.checksum
            let expectations = machine.expectations(of: url)
            var source = file.url
            if keepsOldFile {
                let folder: URL
                switch target {
                case .replace(let path): folder = path.deletingLastPathComponent()
                case .unique(let area, _): folder = area
                }
                source = folder.appendingPathComponent(".downloader-copy-\(UUID().uuidString)")
                guard (try? FileManager.default.copyItem(at: file.url, to: source)) != nil else { return }
            }
            defer { if source != file.url { try? FileManager.default.removeItem(at: source) } }
            guard
                let moved = try? FilePlacement.place(
                    .file(source), at: target, length: file.length, checksum: checksum, downloadURL: url,
                    claims: directory.claims,
                    willClaim: { [journal] claimed in
                        var entry = JournalEntry(
                            placing: url, options: placed, expectations: expectations,
                            name: claimed.lastPathComponent, length: file.length, checksum: checksum,
                            suggested: suggested)
                        // Where the file is until it moves: a crash before the move finds it there.
                        entry.replaced = .init(
                            name: file.url.lastPathComponent, length: file.length, checksum: checksum)
                        journal?.appendNow([.put(entry)])
                    })
            else { return }
            if moved != file.url { directory.claims.release(file.url, of: url) }
            completedFiles[url]?.url = moved
            record.receipt.fileURL = moved
            record.receipt.filename = moved.lastPathComponent
        }
        let moved = book[url]?.receipt != record.receipt
        book[url] = record
        persist(url)
        if moved { emit(.progress(record.receipt)) }  // the state is the same: the receipt changed otherwise
    }
}
