import Foundation

extension Hashing {
    /// A streaming SHA-256 hasher (FIPS 180-4) whose intermediate state can be saved and restored.
    ///
    /// The shape follows swift-crypto's `SHA256` and this library's `MD5`:
    ///
    /// ```swift
    /// var sha = SHA256()
    /// sha.update(data: firstChunk)
    /// sha.update(data: secondChunk)
    /// print(sha.finalize())   // 64 lowercase hex digits
    /// ```
    ///
    /// Whole blocks are hashed in place from the caller's buffer and `update` never allocates. The state is `Codable`:
    /// saved beside a partial file, a resume continues the hash without reading the file again.
    public struct SHA256: Sendable {
        typealias Words = (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32)

        /// The eight chaining words.
        var state: Words = (
            0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19
        )
        var buffer = BlockBuffer()

        /// How many bytes have been hashed so far.
        public var byteCount: UInt64 { hashedByteCount }

        /// Creates a hasher with the initial SHA-256 state.
        public init() {}

        /// Adds the bytes of a raw buffer to the hash.
        /// - Parameter bufferPointer: the bytes; whole blocks are read from it in place.
        public mutating func update(bufferPointer: UnsafeRawBufferPointer) { absorb(bufferPointer) }

        /// Returns the digest of every byte added so far, without consuming the hasher.
        /// - Returns: the 32-byte digest.
        public func finalize() -> SHA256Digest { finalized() }
    }
}

extension SHA256: BlockHashFunction {
    static let wordCount = 8
    static let lengthIsBigEndian = true
    var words: [UInt32] { [state.0, state.1, state.2, state.3, state.4, state.5, state.6, state.7] }
    mutating func setWords(_ w: [UInt32]) { state = (w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]) }
    func digest() -> SHA256Digest { SHA256Digest(bytes: bigEndianBytes(words))! }

    /// Decodes a saved hasher state.
    /// - Throws: `DecodingError.dataCorrupted` when the words, the count or the pending bytes are inconsistent.
    public init(from decoder: any Decoder) throws { self = try Self.restored(from: decoder) }

    /// Encodes the hasher state: the eight words, the byte count and the pending partial block (base64).
    public func encode(to encoder: any Encoder) throws { try save(to: encoder) }

    public static func == (lhs: Hashing.SHA256, rhs: Hashing.SHA256) -> Bool { lhs.hasSameState(as: rhs) }
}
