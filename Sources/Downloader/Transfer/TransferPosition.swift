import Foundation

/// What is known of the resource's version, saved with every checkpoint.
struct ResourceMetadata: Sendable, Equatable {
    var validators = Validators()
    var totalLength: Int64?
    var rangesSupported = true
    var suggestedFilename: String?
    /// The whole file's checksums the server announced.
    var announced: [Checksum] = []
    var restartedAfterMismatch = false
    /// The server's ETags for this resource proved unreliable (see `RequestEnd.unreliableETag`): responses are judged
    /// without them.
    var ignoresETag = false
    /// The `Content-Encoding` the server labelled the body with (URLSession decoded it: the file holds decoded bytes).
    var decodedEncoding: String?
}

/// The network side of a transfer: how far the accepted bytes reach and what the responses said.
///
/// A value owned by `Transfer.run()`. During a request it moves into the request's sink (which alone runs on the
/// delegate queue) and comes back when the request has ended, so no lock guards it: requests are sequential. The
/// disk stages never read it; what they need travels in `DiskCommand`s.
struct TransferPosition: Sendable {
    /// Bytes accepted from responses and handed to the disk (equal to the partial file's length once it is drained).
    private(set) var offset: Int64 = 0
    /// What the responses said about the resource.
    var metadata = ResourceMetadata()
    /// The last bytes accepted (at most two times `keptLength`, in a buffer of their own), while `keepsRecentBytes`.
    private(set) var recentBytes = Data()
    /// Whether to keep `recentBytes`: a resource without a strong validator is continued only after comparing the bytes
    /// before the resume point with the ones the file has (no splice).
    var keepsRecentBytes = false
    /// How many recent bytes a continuity check needs.
    let keptLength: Int
    /// For a file fetched in segments, the ranges on disk after `offset` (`nil`: the file is written from its start
    /// only, so everything after `offset` is missing).
    var written: [Range<Int64>]?
    /// Whether ranges of this resource proved unusable in this download (`RequestEnd.wholeWithoutRanges`): every
    /// request asks for the whole file, also after a restart.
    var wholeOnly = false

    /// Creates the position of an empty file.
    /// - Parameter keptLength: how many recent bytes a continuity check needs.
    init(keptLength: Int = Transfer.continuityCheckLength) {
        self.keptLength = keptLength
    }

    /// Continues after `length` bytes that an earlier run left (their bytes are in the partial file, not in memory).
    mutating func resume(at length: Int64) {
        offset = length
        recentBytes = Data()
    }

    /// Accepts bytes that follow the ones accepted so far.
    mutating func accept(_ data: Data) {
        offset += Int64(data.count)
        guard keepsRecentBytes else { return }
        recentBytes.append(data)
        // A copy, not a `suffix`: a slice of `Data` keeps the whole buffer it was cut from, and appending to it grows
        // that buffer, so the body stayed in memory (127 MB for 128 MiB without an ETag; the bound is 96 MB).
        if recentBytes.count > 2 * keptLength {
            recentBytes = recentBytes.suffix(keptLength).withUnsafeBytes { Data($0) }
        }
    }

    /// Starts again from byte 0 (the metadata stays: the caller decides what is still true).
    mutating func startOver() {
        offset = 0
        recentBytes = Data()
        written = nil
    }

    /// The byte ranges still missing from a file of `total` bytes.
    func missing(total: Int64) -> [Range<Int64>] {
        var missing: [Range<Int64>] = []
        var start = offset
        for range in written ?? [] where range.upperBound > start {
            if range.lowerBound > start { missing.append(start..<min(range.lowerBound, total)) }
            start = range.upperBound
        }
        if start < total { missing.append(start..<total) }
        return missing.filter { !$0.isEmpty }
    }

    /// The last `count` accepted bytes, when they are still in memory.
    func lastBytes(_ count: Int) -> Data? {
        recentBytes.count >= count ? recentBytes.suffix(count) : nil
    }
}

/// One rule for "is this still the version the partial file holds?", used by the HEAD before a resume
/// (`Transfer.restore`) and by every continuation's response (`ResponseJudge`), so that a resume and a window decide
/// alike (issue #33: the HEAD once judged by a rule of its own and restarted from byte 0 where a window would have
/// continued).
enum VersionComparison: Sendable, Equatable {
    /// Nothing shows another version.
    case same
    /// Only the ETag differs: the length is the same, and so is Last-Modified where both have one — backends that
    /// disagree on ETags for the same bytes. The ETag is ignored from then on, and each continuation compares the
    /// bytes before it (`Transfer.continuityCheckLength`).
    case otherETag(reason: String)
    /// Another version: its bytes cannot be spliced onto the partial file's.
    case changed(reason: String)
}

extension ResourceMetadata {
    /// Compares an answer about the resource with the version this metadata describes.
    /// - Parameters:
    ///   - validators: the answer's validators, read with `ignoringETag: ignoresETag`.
    ///   - completeLength: the whole resource's length the answer gives, if any.
    /// - Returns: whether the answer is the same version, the same bytes under another ETag, or another version.
    func compare(_ validators: Validators, completeLength: Int64?) -> VersionComparison {
        var validators = validators
        // A weak ETag, then the same tag strong, match by the weak comparison (RFC 9110 §8.8.3.2): Apache marks the ETag
        // of a file written within the second weak, and strong a moment later. The known (weak) one is kept, so each
        // continuation still compares the bytes before it. Strong, then weak, is not taken as the same.
        if let known = self.validators.etag, known.hasPrefix("W/"), validators.etag == String(known.dropFirst(2)) {
            validators.etag = known
        }
        if validators.differs(from: self.validators) {
            let sameLength = totalLength != nil && completeLength == totalLength
            let sameDate =
                validators.lastModified == nil || self.validators.lastModified == nil
                || validators.lastModified == self.validators.lastModified
            if !ignoresETag, self.validators.etag != nil, validators.etag != nil, sameLength, sameDate {
                return .otherETag(
                    reason: "the server answers with another ETag (\(validators.etag ?? "")) for the same length; its "
                        + "ETags are ignored, and each continuation compares the bytes before it")
            }
            return .changed(reason: "the resource changed (validators differ)")
        }
        if let total = totalLength, let complete = completeLength, complete != total {
            return .changed(reason: "the resource's length changed from \(total) to \(complete)")
        }
        return .same
    }

    /// Stops trusting the server's ETags (after `VersionComparison.otherETag`).
    mutating func ignoreETags() {
        ignoresETag = true
        validators.etag = nil
    }
}

/// How long a transfer's next full Range window is: a value whose events are a window's end and a window cut short
/// because the disk fell behind, tested without sockets.
///
/// On a link with a long round trip every window costs one idle round trip before its first byte, so windows grow
/// while the network, not the disk, is the slower side: a full window during which never more than a quarter of a
/// base window waited to be written, and the hash stage kept what it had not hashed in memory, makes the next four
/// times as long, up to `maximum` (from 8 MiB: 32, then 128 MiB, so 256 MiB take four requests, not 32). Memory keeps its bound: a grown window ends early once more than one and a half base windows wait
/// for the disk, and the windows start again at `base`. A window of the base size needs no such limit: the next
/// request waits until the disk is past the middle of this one, so at most one and a half windows wait.
struct WindowSizing: Sendable, Equatable {
    /// The first full window, and the size windows return to when the disk falls behind.
    let base: Int64
    /// The longest window.
    let maximum: Int64
    /// The length of the next full window.
    private(set) var full: Int64

    /// Starts at `base`.
    /// - Parameters:
    ///   - base: the first full window (at least one byte).
    ///   - maximum: the longest window (never less than `base`).
    init(base: Int64, maximum: Int64) {
        self.base = max(1, base)
        self.maximum = max(self.base, maximum)
        full = self.base
    }

    /// A window of `length` bytes arrived whole; at most `peakUnwritten` of the received bytes waited for the disk at
    /// once while it arrived, and `hashFellBehind` says whether the hasher had to read some of them back from the
    /// file (hashing, not writing, was the slower side).
    mutating func windowEnded(length: Int64, peakUnwritten: Int64, hashFellBehind: Bool = false) {
        guard length == full, peakUnwritten <= base / 4, !hashFellBehind else { return }
        full = min(4 * full, maximum)
    }

    /// A grown window ended early because too many of its bytes waited for the disk.
    mutating func diskFellBehind() {
        full = base
    }

    /// The most received bytes a window of `length` bytes lets wait for the disk before it ends early; `nil` when its
    /// own length bounds them.
    func unwrittenLimit(forWindowOf length: Int64) -> Int64? {
        length > base ? base * 3 / 2 : nil
    }
}
