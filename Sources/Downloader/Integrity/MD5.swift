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
