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
    /// The last bytes accepted (between one and two times `keptLength`), while `keepsRecentBytes`.
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
        if recentBytes.count > 2 * keptLength { recentBytes = recentBytes.suffix(keptLength) }
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
