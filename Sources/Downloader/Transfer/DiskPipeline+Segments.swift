import Foundation

/// Positional writes for a download fetched in segments: the watermark (the bytes from 0 without a gap) and hashing
/// in order as it rises, so the digest is ready when the last segment lands.
extension DiskPipeline {
    /// The ranges a checkpoint lists (disk queue, or drained): those written after the watermark, when segmented.
    var segmentsToSave: [Range<Int64>]? { segmented ? beyond : nil }

    /// Writes bytes at an offset and raises the watermark over every range that now joins it (disk queue).
    func write(_ data: Data, at start: Int64) {
        guard failure == nil, !data.isEmpty else { return }
        let range = start..<(start + Int64(data.count))
        do throws(DownloadError) {
            if positional == nil {
                writer?.close()  // bytes so far were appended; from now on every byte is written at its offset
                writer = nil
                positional = FileWriter(descriptor: try files.openPartial(.positional), fileURL: files.partialURL)
            }
            try Self.withBytes(of: data) { (buffer) throws(DownloadError) in
                try positional!.write(buffer, at: start, downloadURL: url)
            }
        } catch {
            fail(error)
            return
        }
        segmented = true
        receivedThisRun += Int64(data.count)
        insert(range)
        segmentBytesSinceCheckpoint += Int64(data.count)
        let before = offset
        while let first = beyond.first, first.lowerBound <= offset {
            offset = max(offset, first.upperBound)
            beyond.removeFirst()
        }
        if offset > before {
            let to = offset
            // The new bytes from the old watermark are in memory when this write starts there; the rest is read back.
            let memory = range.lowerBound == before ? data : Data()
            toHasher { [self] in hashRange(from: before, to: to, memory: memory) }
        }
        // Bytes after the watermark survive a crash only once a saved state lists them: save often, so a `kill -9`
        // refetches at most this much besides what was in flight.
        if segmentBytesSinceCheckpoint >= Self.segmentCheckpointInterval {
            segmentBytesSinceCheckpoint = 0
            let segments = beyond
            toHasher { [self] in saveCheckpoint(segments: segments) }
        }
    }

    /// Before the first byte is written at an offset: the saved state lists the segments (none yet), so that from now
    /// on a crash never leaves a state whose restore takes the bytes after the hashed ones for a contiguous prefix —
    /// the file then has holes where segments had not arrived (found by the chaos run: a wrong file, exit 0). Drained:
    /// the caller owns the pipeline.
    func beginSegments(_ metadata: ResourceMetadata) throws(DownloadError) {
        guard !segmented else { return }
        segmented = true
        try checkpoint(metadata, segments: beyond)
    }

    /// How many bytes written at offsets a saved state may miss.
    static let segmentCheckpointInterval: Int64 = 1 << 20

    /// Adds a written range to `beyond`, merging it with the ranges it touches.
    private func insert(_ range: Range<Int64>) {
        var merged = range
        var kept: [Range<Int64>] = []
        kept.reserveCapacity(beyond.count + 1)
        for existing in beyond {
            if existing.upperBound < merged.lowerBound || existing.lowerBound > merged.upperBound {
                kept.append(existing)
            } else {
                merged = min(existing.lowerBound, merged.lowerBound)..<max(existing.upperBound, merged.upperBound)
            }
        }
        let index = kept.firstIndex { $0.lowerBound > merged.lowerBound } ?? kept.endIndex
        kept.insert(merged, at: index)
        beyond = kept
    }

    /// Continues a file fetched in segments (before the first command): `hash` covers the first `length` bytes and
    /// `written` lists the ranges on disk after them.
    func resume(at length: Int64, hash: StreamingHash?, written: [Range<Int64>]) {
        resume(at: length, hash: hash)
        beyond = written
        segmented = true
    }
}
