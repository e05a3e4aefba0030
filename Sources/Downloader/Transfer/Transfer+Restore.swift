import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Picking up where an earlier run stopped: what the server says now, the partial file and its saved hash, and the
/// bytes before the resume point that a request without a strong validator compares.
extension Transfer {
    /// What a HEAD request told about the resource.
    struct Probe: Sendable {
        var totalLength: Int64?
        var acceptsRanges: Bool
        var validators: Validators
        var suggestedFilename: String?
        var announced: [Checksum]
    }

    /// Asks for the headers. A server that refuses HEAD (400, 403, 405, 501) is not an error: the first GET tells
    /// the same.
    /// - Throws: the status of other failures (404 fails at once), connection errors, `.cancelled`.
    func probe(_ source: URL? = nil) async throws(DownloadError) -> Probe? {
        var request = makeRequest(to: source)
        request.httpMethod = "HEAD"
        let sink = ProbeSink(url: url)
        switch await perform(request, sink: sink) {
        case .finished:
            guard let response = sink.response else { return nil }
            let head = response.head
            switch head.statusCode {
            case 200..<300:
                // The header itself: a HEAD has no body for URLSession to measure.
                let length = response.value(forHTTPHeaderField: "Content-Length").flatMap { Int64($0) }
                return Probe(
                    totalLength: head.isContentEncoded ? nil : length,
                    acceptsRanges: response.value(forHTTPHeaderField: "Accept-Ranges")?.lowercased() != "none",
                    validators: head.validators, suggestedFilename: head.dispositionFilename,
                    announced: head.announcedChecksums(bodyIsWholeFile: true))
            case 400, 403, 405, 501:
                return nil
            default:
                throw .httpStatus(head.statusCode, url: url, retryAfter: head.retryAfter)
            }
        case .failed(let error):
            throw error
        case .cancelled:
            throw .cancelled(url)
        case .restartFromZero, .unsatisfiable, .diskBehind, .cutShort, .wholeWithoutRanges, .unreliableETag:
            return nil
        }
    }

    /// Probes the URL, and its mirrors in turn when it fails (see `DownloadOptions.mirrors`).
    /// - Returns: the first answer, and which source gave it (0: the URL).
    /// - Throws: the last source's error, or `.cancelled`.
    func probeSources() async throws(DownloadError) -> (Probe?, source: Int) {
        let mirrors = self.mirrors
        var source = 0
        while true {
            do {
                return (try await probe(source == 0 ? nil : mirrors[source - 1]), source)
            } catch {
                guard source < mirrors.count, error != .cancelled else { throw error }
                source += 1
                warn(Self.switchingMessage(after: error, to: mirrors[source - 1]))
            }
        }
    }

    /// Picks up the partial file before the pipeline's first command, as `decideRestore` decides.
    ///
    /// The rules, so that a file reported verified is always the bytes on disk:
    /// - A saved state that fails its own checksum (edited, torn), names another URL, or lists segments the file
    ///   cannot have is not used: a warning, and the file starts again from byte 0.
    /// - A partial file exactly as its state saw it (length, inode and modification time: a clean stop) continues
    ///   from the saved hash.
    /// - A partial file changed since (bytes written after the state before a crash, a power loss, an edit) is used
    ///   only once hashing its first bytes again from disk gives the saved hash; otherwise it starts from byte 0.
    ///   After that check, the bytes after the hashed ones are kept when the machine has not restarted since the state
    ///   was saved (the page cache still holds what this process wrote); after a restart only the synced bytes the
    ///   state counts are (the file is cut back to them). Listed segments were synced before their state was saved
    ///   and are kept.
    /// - Parameters:
    ///   - probe: what a HEAD said, if one was sent.
    ///   - hasState: whether `run()` found a saved state (only this transfer saves one for its URL): without one,
    ///     the state is not looked for again (a `newfstatat` a file, issue #52).
    /// - Returns: the network side's starting position.
    func restore(
        _ pipeline: DiskPipeline, probe: Probe?, hasState: Bool
    ) throws(DownloadError) -> TransferPosition {
        configuration.beforeRestore.call?()
        let saved: PartialState
        switch hasState ? pipeline.files.loadState() : .missing {
        case .missing:
            pipeline.shared.withLock { $0.stateMayExist = false }  // none to delete when it starts over (issue #52)
            return startOver(pipeline, probe: probe)
        case .unusable(let reason):
            warn("the saved state of \(pipeline.files.partialName) was not used (\(reason)); starting from byte 0")
            return startOver(pipeline, probe: probe)
        case .valid(let state):
            saved = state
        }
        guard let identity = pipeline.files.partialIdentity else {
            // No bytes (a server that ignores Range: they were not kept), but what was learnt of the server holds.
            var position = startOver(pipeline, probe: probe)
            position.metadata.rangesSupported = position.metadata.rangesSupported && saved.rangesSupported
            return position
        }
        let plan: RestorePlan
        switch Self.decideRestore(
            saved: saved, identity: identity, probe: probe, boot: Boot.identifier, name: pipeline.files.partialName)
        {
        case .startOver(let warning):
            if let warning { warn(warning) }
            return startOver(pipeline, probe: probe)
        case .resume(let decided):
            plan = decided
        }
        plan.warnings.forEach(warn)
        let metadata = plan.metadata
        // The algorithm now wanted: a new expectation may ask for another one than the saved hash's.
        let wanted = pipeline.expectation?.algorithm ?? (pipeline.hashesByDefault ? saved.hash?.algorithm ?? .md5 : nil)
        var hash: StreamingHash?
        if !plan.checksPrefix {
            if let wanted {
                if let savedHash = saved.hash, savedHash.algorithm == wanted {
                    hash = savedHash
                } else {
                    hash = StreamingHash(wanted)
                    try rehash(pipeline, into: &hash!, from: 0, to: saved.hashedLength)
                }
            }
        } else {
            let savedHash = saved.hash!
            var check = StreamingHash(savedHash.algorithm)
            var other = wanted.flatMap { $0 == savedHash.algorithm ? nil : StreamingHash($0) }
            try rehash(pipeline, into: &check, and: &other, from: 0, to: saved.hashedLength)
            guard check == savedHash else {
                warn(
                    "the first \(saved.hashedLength) bytes of \(pipeline.files.partialName) are not the bytes that were "
                        + "saved (changed on disk); starting from byte 0")
                return startOver(pipeline, probe: probe)
            }
            hash = wanted == nil ? nil : (other ?? check)
            if plan.keptLength < identity.size { try truncatePartial(pipeline, to: plan.keptLength) }
        }
        let length = plan.keptLength
        if let segments = plan.segments {
            return try restoreSegments(
                pipeline, hashedLength: saved.hashedLength, hash: hash, segments: segments, metadata: metadata)
        }
        if hash != nil { try rehash(pipeline, into: &hash!, from: saved.hashedLength, to: length) }
        pipeline.resume(at: length, hash: hash)
        try pipeline.checkpoint(metadata, segments: nil)
        var position = TransferPosition()
        position.resume(at: length)
        position.metadata = metadata
        return position
    }

    /// Picks up a file fetched in segments: `hash` covers its first `hashedLength` bytes, the listed ranges after them
    /// are on disk, and the ranges that join the hashed bytes are hashed now.
    private func restoreSegments(
        _ pipeline: DiskPipeline, hashedLength: Int64, hash: StreamingHash?, segments: [Range<Int64>],
        metadata: ResourceMetadata
    ) throws(DownloadError) -> TransferPosition {
        var written = segments
        var hash = hash
        var watermark = hashedLength
        while let first = written.first, first.lowerBound <= watermark {
            watermark = max(watermark, first.upperBound)
            written.removeFirst()
        }
        if hash != nil { try rehash(pipeline, into: &hash!, from: hashedLength, to: watermark) }
        pipeline.resume(at: watermark, hash: hash, written: written)
        try pipeline.checkpoint(metadata, segments: written)
        var position = TransferPosition()
        position.resume(at: watermark)
        position.metadata = metadata
        position.written = written
        return position
    }

    /// Starts from an empty file with what the probe said.
    private func startOver(_ pipeline: DiskPipeline, probe: Probe?) -> TransferPosition {
        var metadata = ResourceMetadata()
        metadata.validators = probe?.validators ?? Validators()
        metadata.totalLength = probe?.totalLength
        metadata.rangesSupported = probe?.acceptsRanges ?? true
        metadata.suggestedFilename = probe?.suggestedFilename
        metadata.announced = probe?.announced ?? []
        // Done here, not sent: `restore` runs before the pipeline's first command (the disk queue is not woken for it).
        pipeline.startOverNow(announced: metadata.announced)
        // No checkpoint yet: an empty file has nothing to resume. The first response saves one, unless the file is
        // small (see `ResponseJudge.uncheckpointedSize`).
        var position = TransferPosition()
        position.metadata = metadata
        return position
    }

    /// The last `count` bytes of the file so far: from memory when this run received them, else from the partial file
    /// (after the disk has written everything).
    func lastBytes(
        _ pipeline: DiskPipeline, _ position: TransferPosition, count: Int
    ) async throws(DownloadError) -> Data {
        if let bytes = position.lastBytes(count) { return bytes }
        if let failure = await pipeline.drained() { throw failure }
        var data = Data()
        let fd = try pipeline.files.openPartial(.read)
        defer { _ = closeDescriptor(fd) }
        try FileReader.read(
            fd, from: pipeline.offset - Int64(count), to: pipeline.offset, file: pipeline.files.partialURL, url: url
        ) {
            data.append(contentsOf: $0)
        }
        return data
    }

    /// Feeds bytes `from..<to` of the partial file into `hash`, and into `other` when there is one.
    func rehash(
        _ pipeline: DiskPipeline, into hash: inout StreamingHash, and other: inout StreamingHash?, from: Int64,
        to: Int64
    ) throws(DownloadError) {
        guard to > from else { return }
        let fd = try pipeline.files.openPartial(.read)
        defer { _ = closeDescriptor(fd) }
        try FileReader.read(fd, from: from, to: to, file: pipeline.files.partialURL, url: url) { bytes in
            hash.update(bufferPointer: bytes)
            other?.update(bufferPointer: bytes)
        }
    }

    /// Feeds bytes `from..<to` of the partial file into `hash`.
    func rehash(_ pipeline: DiskPipeline, into hash: inout StreamingHash, from: Int64, to: Int64) throws(DownloadError)
    {
        var none: StreamingHash?
        try rehash(pipeline, into: &hash, and: &none, from: from, to: to)
    }

    /// Cuts the partial file back to its first `length` bytes (the ones a saved hash vouches for).
    private func truncatePartial(_ pipeline: DiskPipeline, to length: Int64) throws(DownloadError) {
        let fd = try pipeline.files.openPartial(.positional)
        defer { _ = closeDescriptor(fd) }
        guard ftruncate(fd, off_t(length)) == 0 else {
            throw .fileSystem(
                url, reason: "cannot shorten \(pipeline.files.partialName): \(POSIXError.current.localizedDescription)")
        }
    }
}

/// The restore rules as a value (issue #33): what picking up a partial file decides from its saved state, the file as
/// it is now and what HEAD said, tested without files or sockets (`TransferRestoreDecisionTests`). `Transfer.restore`
/// reads the state and carries the decision out (hashing, cutting the file).
extension Transfer {
    /// How a partial file is picked up.
    enum RestoreDecision: Sendable, Equatable {
        /// Its bytes cannot be used: from byte 0, after the warning if there is one.
        case startOver(warning: String?)
        /// Its bytes are used as the plan says.
        case resume(RestorePlan)
    }

    /// How a partial file continues.
    struct RestorePlan: Sendable, Equatable {
        /// The version the bytes belong to, completed by what HEAD said.
        var metadata: ResourceMetadata
        /// The file changed since its state was saved (bytes written after it before a crash, a power loss, an edit):
        /// its first `hashedLength` bytes are hashed again and must give the saved hash, else it starts over.
        var checksPrefix: Bool
        /// The bytes kept from byte 0: the whole file, or after a restart of the machine only the synced bytes the
        /// state counts (the page cache that held the rest is gone). Listed segments were synced and are kept.
        var keptLength: Int64
        /// The ranges written after the hashed bytes, for a file fetched in segments.
        var segments: [Range<Int64>]?
        /// What the user is told (a server whose ETags proved unreliable).
        var warnings: [String] = []
    }

    /// Decides how a partial file is picked up.
    /// - Parameters:
    ///   - saved: its saved state (valid: its own checksum matched).
    ///   - identity: the partial file as it is now.
    ///   - probe: what HEAD said, if it was asked and answered.
    ///   - boot: this machine's boot (`Boot.identifier`).
    ///   - name: the partial file's name, for the warnings.
    /// - Returns: start over, or resume with a plan.
    static func decideRestore(
        saved: PartialState, identity: FileIdentity, probe: Probe?, boot: String?, name: String
    ) -> RestoreDecision {
        var metadata = ResourceMetadata()
        metadata.validators = saved.validators
        metadata.totalLength = saved.totalLength
        metadata.ignoresETag = saved.ignoresETag
        var warnings: [String] = []
        if let probe {
            // The rule every continuation's response meets (`ResourceMetadata.compare`).
            switch metadata.compare(
                probe.validators.ignoringETag(metadata.ignoresETag), completeLength: probe.totalLength)
            {
            case .same: break
            case .otherETag(let reason):
                warnings.append(reason)
                metadata.ignoreETags()
            case .changed(let reason):
                return .startOver(warning: "\(reason); starting from byte 0")
            }
            if metadata.validators.isEmpty { metadata.validators = probe.validators.ignoringETag(metadata.ignoresETag) }
        }
        metadata.totalLength = metadata.totalLength ?? probe?.totalLength
        metadata.rangesSupported = saved.rangesSupported && (probe?.acceptsRanges ?? true)
        metadata.suggestedFilename = saved.suggestedFilename ?? probe?.suggestedFilename
        metadata.announced = saved.announced.isEmpty ? (probe?.announced ?? []) : saved.announced
        metadata.restartedAfterMismatch = saved.restartedAfterMismatch
        if let total = metadata.totalLength, identity.size > total {
            return .startOver(warning: "\(name) is longer than the resource; starting from byte 0")
        }
        guard saved.hashedLength <= identity.size else {
            return .startOver(warning: "\(name) is shorter than its saved state; starting from byte 0")
        }
        if let segments = saved.segments {
            guard let total = metadata.totalLength,
                segmentsAreValid(segments, after: saved.hashedLength, within: min(identity.size, total))
            else {
                return .startOver(warning: "the saved segments of \(name) do not fit the file; starting from byte 0")
            }
        }
        // As the state left it, or never hashed (nothing to check it with: the receipt then says so).
        let checksPrefix = saved.file != identity && saved.hash != nil
        let sameBoot = saved.boot != nil && saved.boot == boot
        let keptLength = checksPrefix && !sameBoot && saved.segments == nil ? saved.hashedLength : identity.size
        return .resume(
            RestorePlan(
                metadata: metadata, checksPrefix: checksPrefix, keptLength: keptLength, segments: saved.segments,
                warnings: warnings))
    }

    /// Whether a saved segment list can describe the file: non-empty ranges inside its length, sorted and apart, the
    /// first starting no earlier than the hashed bytes end (a file not hashed lists its first bytes from 0).
    static func segmentsAreValid(_ segments: [Range<Int64>], after hashed: Int64, within length: Int64) -> Bool {
        var previousEnd: Int64?
        for range in segments {
            guard !range.isEmpty, range.lowerBound >= hashed, range.upperBound <= length,
                previousEnd.map({ range.lowerBound > $0 }) ?? true
            else { return false }
            previousEnd = range.upperBound
        }
        return true
    }
}

extension Transfer {
    /// Whether HEAD proves a delivered file is the server's current version: only a proof counts — the same strong
    /// ETag or Last-Modified date — and the same length.
    static func isCurrent(_ record: FileRecord, probe: Probe) -> Bool {
        record.validators.proves(probe.validators) && (probe.totalLength.map { $0 == record.length } ?? true)
    }

    /// The reuse rule as a value: whether the file an earlier download of the URL delivered answers this one, from
    /// what HEAD said and the file's digest (`reuse(_:expected:)` carries it out).
    /// - Parameters:
    ///   - record: what the file was when it was delivered.
    ///   - probe: what HEAD says now.
    ///   - checksum: the file's digest in the algorithm wanted (the recorded one, or hashed again for an expectation).
    ///   - expected: the checksum the caller expects, if any.
    ///   - hashes: whether downloads are hashed without an expectation (`DownloadOptions.computesChecksum`).
    /// - Returns: how the file is verified when it answers; `nil` when it does not (it is downloaded again and
    ///   replaced once verified).
    static func decideReuse(
        record: FileRecord, probe: Probe, checksum: Checksum?, expected: Checksum?, hashes: Bool
    ) -> Verification? {
        guard isCurrent(record, probe: probe) else { return nil }
        let target = expected ?? probe.announced.first { $0.algorithm == checksum?.algorithm }
        if let target, target != checksum { return nil }
        guard let checksum else { return hashes || expected != nil ? nil : .lengthOnly }
        return target != nil ? .checksum(checksum) : .computed(checksum)
    }
}

/// A rerun after success costs a HEAD at most: the file an earlier download of the URL delivered carries a
/// `FileRecord`, and the server's answer to HEAD says whether it is still the current version.
extension Transfer {
    /// A file an earlier download of this URL delivered, where it can be known before any request: the destination,
    /// or the name the URL gives in the completed area (a name from `Content-Disposition` is learnt only from a
    /// response; such files are recognised after their first request, as identical, instead).
    struct DeliveredFile: Sendable {
        var url: URL
        var record: FileRecord
        var identity: FileIdentity
    }

    /// What a download with no saved state finds first (`prepareFresh`).
    enum FreshStart: Sendable {
        /// A file this URL delivered earlier, still as recorded: HEAD tells next whether it is current.
        case delivered(DeliveredFile)
        /// None: the partial file is ready for the first response.
        case restored(TransferPosition)
    }

    /// Looks for a file this URL delivered earlier and, when there is none, starts the partial file: the two steps a
    /// fresh download takes before its first request, in one blocking call.
    /// - Parameter pipeline: the transfer's disk side, not yet sent a command.
    /// - Returns: the delivered file, or the position to download from.
    /// - Throws: what `restore` throws.
    func prepareFresh(_ pipeline: DiskPipeline) throws(DownloadError) -> FreshStart {
        if let recorded = deliveredFile() { return .delivered(recorded) }
        return .restored(try restore(pipeline, probe: nil, hasState: false))
    }

    /// `prepareFresh` without its hop to a `Blocking` thread, for the common case: nothing at all lies where this URL
    /// would deliver its file (one `lstat`, a look-up like `PartialFiles.hasState`'s). The partial file is then made by
    /// the disk queue with the body's first bytes (`DiskCommand.startOver` waits for a wake), so a small file's
    /// creation, write, hash and placement take one hop, in `finish` (issue #52).
    /// - Parameter pipeline: the transfer's disk side, not yet sent a command.
    /// - Returns: the position to download from (byte 0); `nil` when something is at that path, or a test holds the
    ///   file work (`beforeRestore`): then `prepareFresh` decides, on a `Blocking` thread.
    func startFreshWithoutHop(_ pipeline: DiskPipeline) -> TransferPosition? {
        guard nothingDelivered else { return nil }
        startFresh(pipeline)
        return TransferPosition()
    }

    /// Whether nothing at all lies where this URL would deliver its file (one `lstat`) and no test holds the file
    /// work (`beforeRestore`): a fresh download then starts without a hop.
    var nothingDelivered: Bool {
        guard configuration.beforeRestore.call == nil else { return false }
        var info = stat()
        return lstat(directory.deliveredFilePath(of: url, options: options), &info) != 0 && errno == ENOENT
    }

    /// Readies a pipeline for a fresh file as `restore` finding no state would: nothing to delete, the file made with
    /// the first bytes.
    func startFresh(_ pipeline: DiskPipeline) {
        pipeline.shared.withLock { $0.stateMayExist = false }
        pipeline.send(.startOver(announced: []))
    }

    /// The file this URL delivered, if there is one and it still holds the recorded content: the same identity,
    /// or, if it was touched, the same digest when hashed again (locally). A file changed since is the user's now:
    /// never reused, never replaced.
    func deliveredFile() -> DeliveredFile? {
        // Read by path first: most downloads delivered nothing yet, and the URL is built only for a file that is
        // there (5,000 instructions a download; issue #52).
        let path = directory.deliveredFilePath(of: url, options: options)
        guard let (record, identity) = FileRecord.read(atPath: path, for: url), identity.size == record.length else {
            return nil
        }
        let target = URL(fileURLWithPath: path, isDirectory: false)
        guard directory.claims.owner(of: target).map({ $0 == url }) ?? true else { return nil }
        if identity != record.file {
            guard let recorded = record.checksum,
                (try? FileDigest.checksum(of: target, algorithm: recorded.algorithm)) == recorded
            else { return nil }
        }
        return DeliveredFile(url: target, record: record, identity: identity)
    }

    /// Answers with the recorded file when HEAD proves the server still has its version (same strong ETag or
    /// Last-Modified date, same length), with its digest (hashed again when another algorithm is expected).
    /// - Returns: the result, or `nil` when the server's version is another or that cannot be proved (the file is
    ///   then downloaded again and replaced once verified); and what HEAD said.
    func reuse(
        _ file: DeliveredFile, expected: Checksum?
    ) async throws(DownloadError) -> (result: TransferResult?, probe: Probe?) {
        guard let probe = try await probe() else { return (nil, nil) }
        var checksum = file.record.checksum
        // Hashed again only for a file HEAD proves current (`decideReuse` would refuse any other).
        if let expected, checksum?.algorithm != expected.algorithm, Self.isCurrent(file.record, probe: probe) {
            let path = file.url
            checksum = await Blocking.run { try? FileDigest.checksum(of: path, algorithm: expected.algorithm) }
        }
        guard
            let verification = Self.decideReuse(
                record: file.record, probe: probe, checksum: checksum, expected: expected,
                hashes: options.computesChecksum),
            directory.claims.claim(file.url, for: url)  // else another download's now
        else { return (nil, probe) }
        let result = TransferResult(
            fileURL: file.url, checksum: checksum, verification: verification, length: file.record.length,
            resumedBytes: file.record.length, receivedBytes: 0, suggestedFilename: probe.suggestedFilename)
        return (result, probe)
    }

    /// Records what the verified partial file is before it is placed (the inode keeps the attributes when it moves),
    /// through the writer's descriptor while it is open.
    ///
    /// Had another file taken the partial file's name meanwhile, the record would be on the written file, not on the
    /// one placed: a rerun would then find no record and download again, never trust the wrong file.
    func recordFile(_ pipeline: DiskPipeline, metadata: ResourceMetadata, checksum: Checksum?) {
        guard !metadata.validators.isEmpty else { return }
        let length = pipeline.offset
        pipeline.withPartialFile { fd in recordFile(fd, length: length, metadata: metadata, checksum: checksum) }
    }

    /// `recordFile` through an open descriptor of the partial file, which has `length` bytes.
    func recordFile(_ fd: Int32, length: Int64, metadata: ResourceMetadata, checksum: Checksum?) {
        guard !metadata.validators.isEmpty, let identity = FileIdentity(descriptor: fd) else { return }
        FileRecord.write(
            FileRecord(validators: metadata.validators, length: length, checksum: checksum, file: identity),
            of: url, to: fd)
    }

    /// Records the verified partial file (`FileRecord`), moves it into the completed area and forgets its saved
    /// state.
    /// - Parameter replacing: a file of this URL's that the verified one replaces, if any.
    func complete(
        _ pipeline: DiskPipeline, metadata: ResourceMetadata, checksum: Checksum?, replacing: URL?
    ) throws(DownloadError) -> (file: URL, name: String) {
        recordFile(pipeline, metadata: metadata, checksum: checksum)
        pipeline.closeFile()
        let placed = try placeVerified(
            pipeline.files, length: pipeline.offset, metadata: metadata, checksum: checksum, replacing: replacing)
        pipeline.removeSavedState()
        return placed
    }

    /// Moves the verified, recorded and closed partial file of `length` bytes into the completed area (`complete`).
    /// - Returns: where it went, and its name.
    func placeVerified(
        _ files: PartialFiles, length: Int64, metadata: ResourceMetadata, checksum: Checksum?, replacing: URL?
    ) throws(DownloadError) -> (file: URL, name: String) {
        let target: FilePlacement.Target
        if let replacing, options.destination == nil {
            target = .replace(replacing)
        } else {
            target = directory.placementTarget(for: options, url: url, suggested: metadata.suggestedFilename)
        }
        if let destination = options.destination {
            do {
                try FileManager.default.createDirectory(
                    at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
            } catch {
                throw .fileSystem(
                    url, reason: "cannot create the folder of \(destination.path): \(error.localizedDescription)")
            }
        }
        let suggested = metadata.suggestedFilename
        return try FilePlacement.place(
            .partial(files), at: target, length: length, checksum: checksum, downloadURL: url,
            claims: directory.claims,
            willClaim: { file, name in
                observer.transferWillPlace(
                    TransferPlacement(
                        file: file, name: name, length: length, checksum: checksum, suggestedFilename: suggested))
            })
    }
}
