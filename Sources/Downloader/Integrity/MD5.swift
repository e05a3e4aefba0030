import Foundation

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
    /// How many bytes have been hashed so far, pending ones included.
    public internal(set) var byteCount: UInt64 = 0
    /// The bytes of an incomplete block, waiting for more input (inline storage: no heap allocation).
    var pending: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)

    /// The number of bytes of the partial block held in `pending`.
    var pendingCount: Int { Int(byteCount & 63) }

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
        guard var input = bufferPointer.baseAddress, bufferPointer.count > 0 else { return }
        var remaining = bufferPointer.count
        let used = pendingCount
        byteCount &+= UInt64(remaining)

        if used > 0 {
            let take = min(64 - used, remaining)
            withUnsafeMutableBytes(of: &pending) { block in
                block.baseAddress!.advanced(by: used).copyMemory(from: input, byteCount: take)
            }
            input += take
            remaining -= take
            guard used + take == 64 else { return }
            withUnsafeBytes(of: pending) { block in
                Self.compress(&state, blocks: block.baseAddress!, count: 1)
            }
        }

        let wholeBlocks = remaining / 64
        if wholeBlocks > 0 {
            Self.compress(&state, blocks: input, count: wholeBlocks)
            input += wholeBlocks * 64
            remaining -= wholeBlocks * 64
        }
        if remaining > 0 {
            withUnsafeMutableBytes(of: &pending) { block in
                block.baseAddress!.copyMemory(from: input, byteCount: remaining)
            }
        }
    }

    /// Returns the digest of every byte added so far.
    ///
    /// The hasher is not consumed: more bytes may be added afterwards and `finalize()` called again.
    /// - Returns: the 16-byte digest.
    public func finalize() -> MD5Digest {
        var copy = self
        let bitLength = byteCount &<< 3
        // Padding: 0x80, zeros up to 56 mod 64, then the 64-bit little-endian bit length.
        let used = pendingCount
        let padLength = used < 56 ? 56 - used : 120 - used
        var tail = [UInt8](repeating: 0, count: padLength + 8)
        tail[0] = 0x80
        withUnsafeBytes(of: bitLength.littleEndian) { length in
            for i in 0..<8 { tail[padLength + i] = length[i] }
        }
        tail.withUnsafeBytes { copy.update(bufferPointer: $0) }
        precondition(copy.pendingCount == 0, "MD5 padding must end on a block boundary")
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
