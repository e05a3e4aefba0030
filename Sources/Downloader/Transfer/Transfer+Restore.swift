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
    /// - Returns: the network side's starting position.
    func restore(_ pipeline: DiskPipeline, probe: Probe?) throws(DownloadError) -> TransferPosition {
        configuration.beforeRestore.call?()
        let saved: PartialState
        switch pipeline.files.loadState() {
        case .missing:
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
        pipeline.send(.startOver(announced: metadata.announced))
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
