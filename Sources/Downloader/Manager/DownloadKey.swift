import Foundation

/// A download's identity in the manager's tables: its URL (without credentials), with the URL's hash computed once.
///
/// A `URL` hashes its whole text at every look-up (about 330 instructions); the manager's tables looked a small
/// file's URL up about 60 times (issue #52). A key made once, when a request arrives, and carried along hashes one
/// integer instead, and two copies of it compare by identity.
struct DownloadKey: Hashable, Sendable, CustomStringConvertible {
    /// The download's URL.
    let url: URL
    private let urlHash: Int

    /// Creates the key of `url`.
    init(_ url: URL) {
        self.url = url
        urlHash = url.hashValue
    }

    static func == (lhs: DownloadKey, rhs: DownloadKey) -> Bool {
        lhs.urlHash == rhs.urlHash && lhs.url == rhs.url
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(urlHash)
    }

    /// The value a `Set` or a `Dictionary` of keys places a key by: the URL's hash, computed once, mixed with the
    /// table's seed (each table has its own, so that keys placed in one table do not cluster in another).
    ///
    /// `Hashable`'s underscored requirement, which the standard library's own small types implement: by default it
    /// runs a `Hasher` (a seed, a combine and a finalize, about 160 instructions) over the same cached hash at each of
    /// the 55 look-ups a small file makes in the manager's tables (issue #52: 12,000 instructions a file). Equal keys
    /// give equal values for every seed. Were the requirement ever dropped, this would be a method nobody calls and
    /// `hash(into:)` would serve as before.
    /// - Parameter seed: the table's seed.
    /// - Returns: the value the table places the key by.
    func _rawHashValue(seed: Int) -> Int {
        Self.mix(urlHash ^ seed)
    }

    /// MurmurHash3's 64-bit finalizer: every bit of `value` moves about half of the result's.
    private static func mix(_ value: Int) -> Int {
        var bits = UInt64(truncatingIfNeeded: value)
        bits ^= bits >> 33
        bits &*= 0xff51_afd7_ed55_8ccd
        bits ^= bits >> 33
        bits &*= 0xc4ce_b9fe_1a85_ec53
        bits ^= bits >> 33
        return Int(truncatingIfNeeded: bits)
    }

    var description: String { url.absoluteString }
}
