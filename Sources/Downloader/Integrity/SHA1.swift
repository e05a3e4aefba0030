import Foundation

extension Hashing {
    /// A streaming SHA-1 hasher (FIPS 180-4) whose intermediate state can be saved and restored. SHA-1 is broken for
    /// signatures; it is here because mirrors still publish `SHA1SUMS`, to check a download against them.
    ///
    /// The shape follows swift-crypto's `Insecure.SHA1` and this library's `MD5`:
    ///
    /// ```swift
    /// var sha = SHA1()
    /// sha.update(data: firstChunk)
    /// sha.update(data: secondChunk)
    /// print(sha.finalize())   // 40 lowercase hex digits
    /// ```
    ///
    /// Whole blocks are hashed in place from the caller's buffer and `update` never allocates. The state is `Codable`:
    /// saved beside a partial file, a resume continues the hash without reading the file again.
    public struct SHA1: Sendable {
        typealias Words = (UInt32, UInt32, UInt32, UInt32, UInt32)

        /// The five chaining words.
        var state: Words = (0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476, 0xc3d2_e1f0)
        var buffer = BlockBuffer()

        /// How many bytes have been hashed so far.
        public var byteCount: UInt64 { hashedByteCount }

        /// Creates a hasher with the initial SHA-1 state.
        public init() {}

        /// Adds the bytes of a raw buffer to the hash.
        /// - Parameter bufferPointer: the bytes; whole blocks are read from it in place.
        public mutating func update(bufferPointer: UnsafeRawBufferPointer) { absorb(bufferPointer) }

        /// Returns the digest of every byte added so far, without consuming the hasher.
        /// - Returns: the 20-byte digest.
        public func finalize() -> SHA1Digest { finalized() }
    }
}

extension SHA1: BlockHashFunction {
    static let wordCount = 5
    static let lengthIsBigEndian = true
    var words: [UInt32] { [state.0, state.1, state.2, state.3, state.4] }
    mutating func setWords(_ w: [UInt32]) { state = (w[0], w[1], w[2], w[3], w[4]) }
    func digest() -> SHA1Digest { SHA1Digest(bytes: bigEndianBytes(words))! }

    /// Decodes a saved hasher state.
    /// - Throws: `DecodingError.dataCorrupted` when the words, the count or the pending bytes are inconsistent.
    public init(from decoder: any Decoder) throws { self = try Self.restored(from: decoder) }

    /// Encodes the hasher state: the five words, the byte count and the pending partial block (base64).
    public func encode(to encoder: any Encoder) throws { try save(to: encoder) }

    public static func == (lhs: Hashing.SHA1, rhs: Hashing.SHA1) -> Bool { lhs.hasSameState(as: rhs) }
}
