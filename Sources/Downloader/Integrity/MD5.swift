import Foundation

extension Hashing {
    /// A streaming MD5 hasher (RFC 1321) whose intermediate state can be saved and restored.
    ///
    /// The shape follows swift-crypto's `Insecure.MD5`. MD5 is used here to verify that downloaded bytes are the bytes the
    /// publisher meant, not for security.
    ///
    /// ```swift
    /// var md5 = MD5()
    /// md5.update(data: firstChunk)
    /// md5.update(data: secondChunk)
    /// print(md5.finalize())   // 32 lowercase hex digits
    /// ```
    ///
    /// Whole 64-byte blocks are hashed in place from the caller's buffer; only a partial block is copied into the
    /// hasher's fixed inline buffer, so `update` never allocates. The state is `Codable`: save it beside a partial file
    /// and restore it in another process to continue hashing where it stopped.
    public struct MD5: Sendable {
        /// The four chaining words A, B, C, D.
        var state: (UInt32, UInt32, UInt32, UInt32) = (0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476)
        /// The partial block and the byte count.
        var buffer = BlockBuffer()

        /// How many bytes have been hashed so far.
        public var byteCount: UInt64 { hashedByteCount }

        /// Creates a hasher with the initial MD5 state.
        public init() {}

        /// Adds the bytes of a raw buffer to the hash.
        /// - Parameter bufferPointer: the bytes; whole blocks are read from it in place.
        public mutating func update(bufferPointer: UnsafeRawBufferPointer) { absorb(bufferPointer) }

        /// Returns the digest of every byte added so far.
        ///
        /// The hasher is not consumed: more bytes may be added afterwards and `finalize()` called again.
        /// - Returns: the 16-byte digest.
        public func finalize() -> MD5Digest { finalized() }
    }
}

extension MD5: BlockHashFunction {
    static let wordCount = 4
    static let lengthIsBigEndian = false
    var words: [UInt32] { [state.0, state.1, state.2, state.3] }
    mutating func setWords(_ w: [UInt32]) { state = (w[0], w[1], w[2], w[3]) }
    func digest() -> MD5Digest { MD5Digest(words: state) }

    /// Decodes a saved hasher state.
    /// - Throws: `DecodingError.dataCorrupted` if the words, the count or the pending bytes are inconsistent.
    public init(from decoder: any Decoder) throws { self = try Self.restored(from: decoder) }

    /// Encodes the hasher state: the four words, the byte count and the pending partial block (base64).
    public func encode(to encoder: any Encoder) throws { try save(to: encoder) }

    public static func == (lhs: Hashing.MD5, rhs: Hashing.MD5) -> Bool { lhs.hasSameState(as: rhs) }
}
