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

// The MD5 block function (RFC 1321), fully unrolled.
//
// Performance notes, measured on Linux x86_64 with Swift 6.3:
// - the 64 round constants are loaded from a table through a pointer. Written as literals, LLVM reassociates
//   `a + x + K` so that the constant addition lands on the critical dependency chain (about 20 % slower);
// - each step adds `x + K` to `a` first (both known early) and the round function last, so only one addition and
//   the rotation sit on the chain from the previous step.

/// The 64 additive constants of RFC 1321, `floor(abs(sin(i + 1)) * 2^32)`.
let md5RoundConstants: [UInt32] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee,
    0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be,
    0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa,
    0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
    0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c,
    0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05,
    0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039,
    0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1,
    0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
]

/// One MD5 step: `b + ((a + x + k + f) <<< s)`.
///
/// `early` is a part of `f` that does not depend on `b` (the newest value) and can be added off the critical path:
/// round 2's `G = (b & d) | (c & ~d)` has disjoint terms, so `G = (d & b) + (~d & c)` and only `d & b` waits for `b`.
@inline(__always)
private func step(
    _ a: UInt32, _ b: UInt32, _ f: UInt32, _ x: UInt32, _ k: UInt32, _ s: UInt32, early: UInt32 = 0
) -> UInt32 {
    let t = ((a &+ (x &+ k)) &+ early) &+ f
    return ((t &<< s) | (t &>> (32 &- s))) &+ b
}

extension MD5 {
    /// Hashes `blockCount` whole 64-byte blocks starting at `base` into the chaining state.
    /// - Parameters:
    ///   - state: the four chaining words, updated in place.
    ///   - base: the first byte of the first block; no alignment is required.
    ///   - blockCount: how many 64-byte blocks to hash.
    static func compress(
        _ state: inout (UInt32, UInt32, UInt32, UInt32),
        blocks base: UnsafeRawPointer,
        count blockCount: Int
    ) {
        md5RoundConstants.withUnsafeBufferPointer { table in
            let k = table.baseAddress!
            var p = base
            for _ in 0..<blockCount {
                compressBlock(&state, p, k)
                p += 64
            }
        }
    }

    /// Hashes one 64-byte block. Kept out of line so that the constant loads stay inside it: hoisted out of a
    /// multi-block loop they are spilled to the stack and the registers run out.
    @inline(never)
    private static func compressBlock(
        _ state: inout (UInt32, UInt32, UInt32, UInt32),
        _ p: UnsafeRawPointer,
        _ k: UnsafePointer<UInt32>
    ) {
        let x0 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 0, as: UInt32.self))
        let x1 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
        let x2 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
        let x3 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
        let x4 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 16, as: UInt32.self))
        let x5 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 20, as: UInt32.self))
        let x6 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 24, as: UInt32.self))
        let x7 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 28, as: UInt32.self))
        let x8 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 32, as: UInt32.self))
        let x9 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 36, as: UInt32.self))
        let x10 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 40, as: UInt32.self))
        let x11 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 44, as: UInt32.self))
        let x12 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 48, as: UInt32.self))
        let x13 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 52, as: UInt32.self))
        let x14 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 56, as: UInt32.self))
        let x15 = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 60, as: UInt32.self))
        var (a, b, c, d) = state
        a = step(a, b, d ^ (b & (c ^ d)), x0, k[0], 7)
        d = step(d, a, c ^ (a & (b ^ c)), x1, k[1], 12)
        c = step(c, d, b ^ (d & (a ^ b)), x2, k[2], 17)
        b = step(b, c, a ^ (c & (d ^ a)), x3, k[3], 22)
        a = step(a, b, d ^ (b & (c ^ d)), x4, k[4], 7)
        d = step(d, a, c ^ (a & (b ^ c)), x5, k[5], 12)
        c = step(c, d, b ^ (d & (a ^ b)), x6, k[6], 17)
        b = step(b, c, a ^ (c & (d ^ a)), x7, k[7], 22)
        a = step(a, b, d ^ (b & (c ^ d)), x8, k[8], 7)
        d = step(d, a, c ^ (a & (b ^ c)), x9, k[9], 12)
        c = step(c, d, b ^ (d & (a ^ b)), x10, k[10], 17)
        b = step(b, c, a ^ (c & (d ^ a)), x11, k[11], 22)
        a = step(a, b, d ^ (b & (c ^ d)), x12, k[12], 7)
        d = step(d, a, c ^ (a & (b ^ c)), x13, k[13], 12)
        c = step(c, d, b ^ (d & (a ^ b)), x14, k[14], 17)
        b = step(b, c, a ^ (c & (d ^ a)), x15, k[15], 22)
        a = step(a, b, d & b, x1, k[16], 5, early: ~d & c)
        d = step(d, a, c & a, x6, k[17], 9, early: ~c & b)
        c = step(c, d, b & d, x11, k[18], 14, early: ~b & a)
        b = step(b, c, a & c, x0, k[19], 20, early: ~a & d)
        a = step(a, b, d & b, x5, k[20], 5, early: ~d & c)
        d = step(d, a, c & a, x10, k[21], 9, early: ~c & b)
        c = step(c, d, b & d, x15, k[22], 14, early: ~b & a)
        b = step(b, c, a & c, x4, k[23], 20, early: ~a & d)
        a = step(a, b, d & b, x9, k[24], 5, early: ~d & c)
        d = step(d, a, c & a, x14, k[25], 9, early: ~c & b)
        c = step(c, d, b & d, x3, k[26], 14, early: ~b & a)
        b = step(b, c, a & c, x8, k[27], 20, early: ~a & d)
        a = step(a, b, d & b, x13, k[28], 5, early: ~d & c)
        d = step(d, a, c & a, x2, k[29], 9, early: ~c & b)
        c = step(c, d, b & d, x7, k[30], 14, early: ~b & a)
        b = step(b, c, a & c, x12, k[31], 20, early: ~a & d)
        a = step(a, b, b ^ (c ^ d), x5, k[32], 4)
        d = step(d, a, a ^ (b ^ c), x8, k[33], 11)
        c = step(c, d, d ^ (a ^ b), x11, k[34], 16)
        b = step(b, c, c ^ (d ^ a), x14, k[35], 23)
        a = step(a, b, b ^ (c ^ d), x1, k[36], 4)
        d = step(d, a, a ^ (b ^ c), x4, k[37], 11)
        c = step(c, d, d ^ (a ^ b), x7, k[38], 16)
        b = step(b, c, c ^ (d ^ a), x10, k[39], 23)
        a = step(a, b, b ^ (c ^ d), x13, k[40], 4)
        d = step(d, a, a ^ (b ^ c), x0, k[41], 11)
        c = step(c, d, d ^ (a ^ b), x3, k[42], 16)
        b = step(b, c, c ^ (d ^ a), x6, k[43], 23)
        a = step(a, b, b ^ (c ^ d), x9, k[44], 4)
        d = step(d, a, a ^ (b ^ c), x12, k[45], 11)
        c = step(c, d, d ^ (a ^ b), x15, k[46], 16)
        b = step(b, c, c ^ (d ^ a), x2, k[47], 23)
        a = step(a, b, c ^ (b | ~d), x0, k[48], 6)
        d = step(d, a, b ^ (a | ~c), x7, k[49], 10)
        c = step(c, d, a ^ (d | ~b), x14, k[50], 15)
        b = step(b, c, d ^ (c | ~a), x5, k[51], 21)
        a = step(a, b, c ^ (b | ~d), x12, k[52], 6)
        d = step(d, a, b ^ (a | ~c), x3, k[53], 10)
        c = step(c, d, a ^ (d | ~b), x10, k[54], 15)
        b = step(b, c, d ^ (c | ~a), x1, k[55], 21)
        a = step(a, b, c ^ (b | ~d), x8, k[56], 6)
        d = step(d, a, b ^ (a | ~c), x15, k[57], 10)
        c = step(c, d, a ^ (d | ~b), x6, k[58], 15)
        b = step(b, c, d ^ (c | ~a), x13, k[59], 21)
        a = step(a, b, c ^ (b | ~d), x4, k[60], 6)
        d = step(d, a, b ^ (a | ~c), x11, k[61], 10)
        c = step(c, d, a ^ (d | ~b), x2, k[62], 15)
        b = step(b, c, d ^ (c | ~a), x9, k[63], 21)
        state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d)
    }
}

extension Hashing {
    /// The 16-byte result of an MD5 hash.
    public struct MD5Digest: Digest {
        public static let byteCount = 16
        /// The digest in its canonical byte order (as printed by `md5sum`).
        public let bytes: [UInt8]

        /// Creates a digest from 16 bytes.
        /// - Parameter bytes: exactly 16 bytes; any other count returns `nil`.
        public init?(bytes: some Collection<UInt8>) {
            guard bytes.count == 16 else { return nil }
            self.bytes = Array(bytes)
        }

        /// Creates a digest from the four final chaining words, each stored little-endian.
        init(words: (UInt32, UInt32, UInt32, UInt32)) {
            var out = [UInt8]()
            out.reserveCapacity(16)
            for word in [words.0, words.1, words.2, words.3] {
                for shift in stride(from: 0, to: 32, by: 8) {
                    out.append(UInt8(truncatingIfNeeded: word >> UInt32(shift)))
                }
            }
            bytes = out
        }
    }
}
