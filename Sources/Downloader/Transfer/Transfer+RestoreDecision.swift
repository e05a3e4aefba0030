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
