import Foundation

extension Hashing {
    /// The shape every hasher of this package shares — swift-crypto's `HashFunction`, plus a state that is `Codable`
    /// (saved beside a partial file, a resume continues the hash without reading the file again), which swift-crypto's
    /// hashers do not offer.
    ///
    /// ```swift
    /// var sha = Hashing.SHA256()
    /// sha.update(data: firstChunk)
    /// sha.update(data: secondChunk)
    /// print(sha.finalize())   // 64 lowercase hex digits
    /// ```
    public protocol HashFunction: Sendable, Codable, Equatable {
        /// What `finalize()` returns.
        associatedtype Digest: Sendable
        /// Creates a hasher with the algorithm's initial state.
        init()
        /// How many bytes have been hashed so far.
        var byteCount: UInt64 { get }
        /// Adds the bytes of a raw buffer to the hash; whole blocks are read from it in place.
        /// - Parameter bufferPointer: the bytes.
        mutating func update(bufferPointer: UnsafeRawBufferPointer)
        /// Returns the digest of every byte added so far, without consuming the hasher: more bytes may follow.
        /// - Returns: the digest.
        func finalize() -> Digest
    }
}

extension Hashing.HashFunction {
    /// Adds bytes to the hash.
    /// - Parameter data: the bytes, in any `DataProtocol` shape (`Data`, `[UInt8]`, a slice, …).
    public mutating func update(data: some DataProtocol) {
        for region in data.regions {
            region.withUnsafeBytes { update(bufferPointer: $0) }
        }
    }

    /// Hashes bytes in one call.
    /// - Parameter data: the bytes to hash.
    /// - Returns: their digest.
    public static func hash(data: some DataProtocol) -> Digest {
        var hasher = Self()
        hasher.update(data: data)
        return hasher.finalize()
    }
}

/// How MD5, SHA-1 and SHA-256 are built alike: chaining words compressed block by block from a `BlockBuffer`, padded
/// at the end, saved as the words, the count and the pending bytes. Each hasher gives its words, compression and
/// digest; the rest is written once here.
protocol BlockHashFunction: Hashing.HashFunction {
    /// The chaining words, as a tuple the compression works on in registers.
    associatedtype Words
    var state: Words { get set }
    var buffer: BlockBuffer { get set }
    /// The words as an array, in order (saving, comparing), and back.
    var words: [UInt32] { get }
    mutating func setWords(_ words: [UInt32])
    /// How many words the state has.
    static var wordCount: Int { get }
    /// Whether the padding ends with the bit length big-endian (SHA) or little-endian (MD5).
    static var lengthIsBigEndian: Bool { get }
    /// Compresses `count` whole 64-byte blocks into the state.
    static func compress(_ state: inout Words, blocks: UnsafeRawPointer, count: Int)
    /// The digest of the state after the padding.
    func digest() -> Digest
}

extension BlockHashFunction {
    /// `byteCount`: the bytes hashed so far.
    var hashedByteCount: UInt64 { buffer.byteCount }

    /// `update(bufferPointer:)`: whole blocks in place, a partial block kept.
    mutating func absorb(_ bytes: UnsafeRawBufferPointer) {
        var words = state
        buffer.absorb(bytes) { Self.compress(&words, blocks: $0, count: $1) }
        state = words
    }

    /// `finalize()`: the digest of a padded copy.
    func finalized() -> Digest {
        var copy = self
        buffer.padding(bigEndianLength: Self.lengthIsBigEndian).withUnsafeBytes { copy.absorb($0) }
        precondition(copy.buffer.pendingCount == 0, "the padding must end on a block boundary")
        return copy.digest()
    }

    /// `init(from:)`: a saved state.
    /// - Throws: `DecodingError.dataCorrupted` when the words, the count or the pending bytes are inconsistent.
    static func restored(from decoder: any Decoder) throws -> Self {
        let (words, buffer) = try SavedBlockHash.restore(wordCount: wordCount, from: decoder)
        var hasher = Self()
        hasher.setWords(words)
        hasher.buffer = buffer
        return hasher
    }

    /// `encode(to:)`: the words, the byte count and the pending partial block (base64).
    func save(to encoder: any Encoder) throws {
        try SavedBlockHash(words: words, buffer: buffer).encode(to: encoder)
    }

    /// `==`: the same words, count and pending bytes.
    func hasSameState(as other: Self) -> Bool {
        words == other.words && buffer.isEqual(to: other.buffer)
    }
}
