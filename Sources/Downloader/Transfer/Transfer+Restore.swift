import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Picking up where an earlier run stopped: what the server says now, the partial file and its saved hash, and the
/// bytes before the resume point that a request without a strong validator compares.
extension Transfer {
    /// What a HEAD request told about the resource.
    struct Probe {
        var totalLength: Int64?
        var acceptsRanges: Bool
        var validators: Validators
        var suggestedFilename: String?
        var announced: [Checksum]
    }

    /// Asks for the headers. A server that refuses HEAD (400, 403, 405, 501) is not an error: the first GET tells
    /// the same.
    /// - Throws: the status of other failures (404 fails at once), connection errors, `.cancelled`.
    func probe() async throws(DownloadError) -> Probe? {
        var request = makeRequest()
        request.httpMethod = "HEAD"
        let sink = ProbeSink(url: url)
        switch await bridge.perform(request, sink: sink) {
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
        case .restartFromZero, .unsatisfiable:
            return nil
        }
    }

    /// Picks up the partial file before the job's first command: with a saved state of the same version, continue its
    /// hash (re-hashing only the bytes written after the last checkpoint); otherwise start from an empty file.
    /// - Returns: the network side's starting position.
    func restore(_ job: TransferJob, probe: Probe?) throws(DownloadError) -> TransferPosition {
        let length = FileManager.default.sizeOfItem(at: job.partialFile)
        if let saved = PartialState.load(from: job.stateFile, for: url), let length {
            var sameVersion = true
            if let probe {
                if probe.validators.differs(from: saved.validators) { sameVersion = false }
                if let now = probe.totalLength, let before = saved.totalLength, now != before { sameVersion = false }
            }
            if sameVersion {
                var metadata = ResourceMetadata()
                metadata.validators =
                    saved.validators.isEmpty ? (probe?.validators ?? saved.validators) : saved.validators
                metadata.totalLength = saved.totalLength ?? probe?.totalLength
                metadata.rangesSupported = saved.rangesSupported && (probe?.acceptsRanges ?? true)
                metadata.suggestedFilename = saved.suggestedFilename ?? probe?.suggestedFilename
                metadata.announced = saved.announced.isEmpty ? (probe?.announced ?? []) : saved.announced
                metadata.restartedAfterMismatch = saved.restartedAfterMismatch
                if let total = metadata.totalLength, length > total { return startOver(job, probe: probe) }
                if let segments = saved.segments {
                    guard let total = metadata.totalLength else { return startOver(job, probe: probe) }
                    return try restoreSegments(
                        job, saved: saved, segments: segments, metadata: metadata, length: min(length, total))
                }
                // The saved hash continues where it stopped; a file hashed with another algorithm than the one now
                // wanted (a new expectation), or not hashed at all, is hashed again from byte 0.
                let wanted = job.expectation?.algorithm ?? (job.hashesByDefault ? saved.hash?.algorithm ?? .md5 : nil)
                var hash: StreamingHash?
                if let wanted {
                    if let savedHash = saved.hash, savedHash.algorithm == wanted, saved.hashedLength <= length {
                        hash = savedHash
                        try rehash(&hash!, of: job.partialFile, from: saved.hashedLength, to: length)
                    } else {
                        hash = StreamingHash(wanted)
                        try rehash(&hash!, of: job.partialFile, from: 0, to: length)
                    }
                }
                job.resume(at: length, hash: hash)
                try job.checkpoint(metadata, segments: nil)
                var position = TransferPosition()
                position.resume(at: length)
                position.metadata = metadata
                return position
            }
        }
        return startOver(job, probe: probe)
    }

    /// Picks up a file fetched in segments: the saved hash covers its first bytes, the listed ranges after them are on
    /// disk (a range the file is too short for, or that overlaps another, is fetched again), and the ranges that
    /// join the hashed bytes are hashed now.
    private func restoreSegments(
        _ job: TransferJob, saved: PartialState, segments: [Range<Int64>], metadata: ResourceMetadata, length: Int64
    ) throws(DownloadError) -> TransferPosition {
        var written: [Range<Int64>] = []
        for range in segments.sorted(by: { $0.lowerBound < $1.lowerBound })
        where range.lowerBound >= 0 && range.upperBound <= length && !range.isEmpty {
            if let last = written.last, range.lowerBound < last.upperBound { continue }
            written.append(range)
        }
        let wanted = job.expectation?.algorithm ?? (job.hashesByDefault ? saved.hash?.algorithm ?? .md5 : nil)
        var hashed = min(saved.hashedLength, length)
        var hash: StreamingHash?
        if let wanted {
            if let savedHash = saved.hash, savedHash.algorithm == wanted, saved.hashedLength <= length {
                hash = savedHash
            } else {
                hash = StreamingHash(wanted)
                hashed = 0
            }
        }
        var watermark = saved.hashedLength <= length ? saved.hashedLength : 0
        while let first = written.first, first.lowerBound <= watermark {
            watermark = max(watermark, first.upperBound)
            written.removeFirst()
        }
        if hash != nil { try rehash(&hash!, of: job.partialFile, from: hashed, to: watermark) }
        job.resume(at: watermark, hash: hash, written: written)
        try job.checkpoint(metadata, segments: written)
        var position = TransferPosition()
        position.resume(at: watermark)
        position.metadata = metadata
        position.written = written
        return position
    }

    /// Starts from an empty file with what the probe said.
    private func startOver(_ job: TransferJob, probe: Probe?) -> TransferPosition {
        var metadata = ResourceMetadata()
        metadata.validators = probe?.validators ?? Validators()
        metadata.totalLength = probe?.totalLength
        metadata.rangesSupported = probe?.acceptsRanges ?? true
        metadata.suggestedFilename = probe?.suggestedFilename
        metadata.announced = probe?.announced ?? []
        job.send(.startOver(announced: metadata.announced))
        // No checkpoint yet: an empty file has nothing to resume. The first response saves one, unless the file is
        // small (see `ResponseJudge.uncheckpointedSize`).
        var position = TransferPosition()
        position.metadata = metadata
        return position
    }

    /// The last `count` bytes of the file so far: from memory when this run received them, else from the partial file
    /// (after the disk has written everything).
    func lastBytes(
        _ job: TransferJob, _ position: TransferPosition, count: Int
    ) async throws(DownloadError) -> Data {
        if let bytes = position.lastBytes(count) { return bytes }
        if let failure = await job.drained() { throw failure }
        do {
            let handle = try FileHandle(forReadingFrom: job.partialFile)
            defer { try? handle.close() }
            try handle.seek(toOffset: UInt64(job.offset - Int64(count)))
            let data = try handle.read(upToCount: count) ?? Data()
            guard data.count == count else { throw DownloadError.fileSystem(url, reason: "the partial file is short") }
            return data
        } catch let error as DownloadError {
            throw error
        } catch {
            throw .fileSystem(url, reason: "cannot read the partial file: \(error.localizedDescription)")
        }
    }

    /// Feeds bytes `from..<to` of `file` into the hash, 1 MiB at a time.
    func rehash(_ hash: inout StreamingHash, of file: URL, from: Int64, to: Int64) throws(DownloadError) {
        guard to > from else { return }
        do {
            let handle = try FileHandle(forReadingFrom: file)
            defer { try? handle.close() }
            try handle.seek(toOffset: UInt64(from))
            var position = from
            while position < to {
                let count = Int(min(1 << 20, to - position))
                guard let data = try handle.read(upToCount: count), !data.isEmpty else { break }
                data.withUnsafeBytes { hash.update(bufferPointer: $0) }
                position += Int64(data.count)
            }
            guard position == to else {
                throw DownloadError.fileSystem(url, reason: "the partial file ended at \(position) while re-hashing")
            }
        } catch let error as DownloadError {
            throw error
        } catch {
            throw .fileSystem(url, reason: "cannot read the partial file: \(error.localizedDescription)")
        }
    }
}
