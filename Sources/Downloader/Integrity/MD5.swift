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
        public var byteCount: UInt64 { buffer.byteCount }

        /// Creates a hasher with the initial MD5 state.
        public init() {}

        /// Adds bytes to the hash.
        /// - Parameter data: the bytes, in any `DataProtocol` shape (`Data`, `[UInt8]`, a slice, …).
        public mutating func update(data: some DataProtocol) {
            for region in data.regions {
                region.withUnsafeBytes { update(bufferPointer: $0) }
            }
        }

        /// Adds the bytes of a raw buffer to the hash.
        /// - Parameter bufferPointer: the bytes; whole blocks are read from it in place.
        public mutating func update(bufferPointer: UnsafeRawBufferPointer) {
            var words = state
            buffer.absorb(bufferPointer) { Self.compress(&words, blocks: $0, count: $1) }
            state = words
        }

        /// Returns the digest of every byte added so far.
        ///
        /// The hasher is not consumed: more bytes may be added afterwards and `finalize()` called again.
        /// - Returns: the 16-byte digest.
        public func finalize() -> MD5Digest {
            var copy = self
            buffer.padding(bigEndianLength: false).withUnsafeBytes { copy.update(bufferPointer: $0) }
            precondition(copy.buffer.pendingCount == 0, "MD5 padding must end on a block boundary")
            return MD5Digest(words: copy.state)
        }

        /// Hashes bytes in one call.
        /// - Parameter data: the bytes to hash.
        /// - Returns: their digest.
        public static func hash(data: some DataProtocol) -> MD5Digest {
            var md5 = MD5()
            md5.update(data: data)
            return md5.finalize()
        }
    }
}
