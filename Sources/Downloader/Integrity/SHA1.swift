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

// The SHA-1 block function (FIPS 180-4 §6.1), unrolled: 80 rounds over five working variables whose roles rotate by
// name, and a 16-word message schedule computed in place.

@inline(__always)
private func rotl(_ x: UInt32, _ n: UInt32) -> UInt32 { (x &<< n) | (x &>> (32 &- n)) }

/// One round: `e += rotl(a, 5) + f(b, c, d) + K + w`, `b = rotl(b, 30)`; the caller rotates the roles.
@inline(__always)
private func round(_ a: UInt32, _ b: inout UInt32, _ e: inout UInt32, _ f: UInt32, _ kw: UInt32) {
    e = e &+ rotl(a, 5) &+ f &+ kw
    b = rotl(b, 30)
}

extension SHA1 {
    /// Hashes `blockCount` whole 64-byte blocks starting at `base` into the chaining state.
    static func compress(_ state: inout Words, blocks base: UnsafeRawPointer, count blockCount: Int) {
        var p = base
        for _ in 0..<blockCount {
            compressBlock(&state, p)
            p += 64
        }
    }

    @inline(never)
    private static func compressBlock(_ state: inout Words, _ p: UnsafeRawPointer) {
        var w0 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 0, as: UInt32.self))
        var w1 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
        var w2 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
        var w3 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
        var w4 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 16, as: UInt32.self))
        var w5 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 20, as: UInt32.self))
        var w6 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 24, as: UInt32.self))
        var w7 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 28, as: UInt32.self))
        var w8 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 32, as: UInt32.self))
        var w9 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 36, as: UInt32.self))
        var w10 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 40, as: UInt32.self))
        var w11 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 44, as: UInt32.self))
        var w12 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 48, as: UInt32.self))
        var w13 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 52, as: UInt32.self))
        var w14 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 56, as: UInt32.self))
        var w15 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 60, as: UInt32.self))
        var (a, b, c, d, e) = state
        round(a, &b, &e, d ^ (b & (c ^ d)), 0x5a82_7999 &+ w0)
        round(e, &a, &d, c ^ (a & (b ^ c)), 0x5a82_7999 &+ w1)
        round(d, &e, &c, b ^ (e & (a ^ b)), 0x5a82_7999 &+ w2)
        round(c, &d, &b, a ^ (d & (e ^ a)), 0x5a82_7999 &+ w3)
        round(b, &c, &a, e ^ (c & (d ^ e)), 0x5a82_7999 &+ w4)
        round(a, &b, &e, d ^ (b & (c ^ d)), 0x5a82_7999 &+ w5)
        round(e, &a, &d, c ^ (a & (b ^ c)), 0x5a82_7999 &+ w6)
        round(d, &e, &c, b ^ (e & (a ^ b)), 0x5a82_7999 &+ w7)
        round(c, &d, &b, a ^ (d & (e ^ a)), 0x5a82_7999 &+ w8)
        round(b, &c, &a, e ^ (c & (d ^ e)), 0x5a82_7999 &+ w9)
        round(a, &b, &e, d ^ (b & (c ^ d)), 0x5a82_7999 &+ w10)
        round(e, &a, &d, c ^ (a & (b ^ c)), 0x5a82_7999 &+ w11)
        round(d, &e, &c, b ^ (e & (a ^ b)), 0x5a82_7999 &+ w12)
        round(c, &d, &b, a ^ (d & (e ^ a)), 0x5a82_7999 &+ w13)
        round(b, &c, &a, e ^ (c & (d ^ e)), 0x5a82_7999 &+ w14)
        round(a, &b, &e, d ^ (b & (c ^ d)), 0x5a82_7999 &+ w15)
        w0 = rotl(w13 ^ w8 ^ w2 ^ w0, 1)
        round(e, &a, &d, c ^ (a & (b ^ c)), 0x5a82_7999 &+ w0)
        w1 = rotl(w14 ^ w9 ^ w3 ^ w1, 1)
        round(d, &e, &c, b ^ (e & (a ^ b)), 0x5a82_7999 &+ w1)
        w2 = rotl(w15 ^ w10 ^ w4 ^ w2, 1)
        round(c, &d, &b, a ^ (d & (e ^ a)), 0x5a82_7999 &+ w2)
        w3 = rotl(w0 ^ w11 ^ w5 ^ w3, 1)
        round(b, &c, &a, e ^ (c & (d ^ e)), 0x5a82_7999 &+ w3)
        w4 = rotl(w1 ^ w12 ^ w6 ^ w4, 1)
        round(a, &b, &e, b ^ c ^ d, 0x6ed9_eba1 &+ w4)
        w5 = rotl(w2 ^ w13 ^ w7 ^ w5, 1)
        round(e, &a, &d, a ^ b ^ c, 0x6ed9_eba1 &+ w5)
        w6 = rotl(w3 ^ w14 ^ w8 ^ w6, 1)
        round(d, &e, &c, e ^ a ^ b, 0x6ed9_eba1 &+ w6)
        w7 = rotl(w4 ^ w15 ^ w9 ^ w7, 1)
        round(c, &d, &b, d ^ e ^ a, 0x6ed9_eba1 &+ w7)
        w8 = rotl(w5 ^ w0 ^ w10 ^ w8, 1)
        round(b, &c, &a, c ^ d ^ e, 0x6ed9_eba1 &+ w8)
        w9 = rotl(w6 ^ w1 ^ w11 ^ w9, 1)
        round(a, &b, &e, b ^ c ^ d, 0x6ed9_eba1 &+ w9)
        w10 = rotl(w7 ^ w2 ^ w12 ^ w10, 1)
        round(e, &a, &d, a ^ b ^ c, 0x6ed9_eba1 &+ w10)
        w11 = rotl(w8 ^ w3 ^ w13 ^ w11, 1)
        round(d, &e, &c, e ^ a ^ b, 0x6ed9_eba1 &+ w11)
        w12 = rotl(w9 ^ w4 ^ w14 ^ w12, 1)
        round(c, &d, &b, d ^ e ^ a, 0x6ed9_eba1 &+ w12)
        w13 = rotl(w10 ^ w5 ^ w15 ^ w13, 1)
        round(b, &c, &a, c ^ d ^ e, 0x6ed9_eba1 &+ w13)
        w14 = rotl(w11 ^ w6 ^ w0 ^ w14, 1)
        round(a, &b, &e, b ^ c ^ d, 0x6ed9_eba1 &+ w14)
        w15 = rotl(w12 ^ w7 ^ w1 ^ w15, 1)
        round(e, &a, &d, a ^ b ^ c, 0x6ed9_eba1 &+ w15)
        w0 = rotl(w13 ^ w8 ^ w2 ^ w0, 1)
        round(d, &e, &c, e ^ a ^ b, 0x6ed9_eba1 &+ w0)
        w1 = rotl(w14 ^ w9 ^ w3 ^ w1, 1)
        round(c, &d, &b, d ^ e ^ a, 0x6ed9_eba1 &+ w1)
        w2 = rotl(w15 ^ w10 ^ w4 ^ w2, 1)
        round(b, &c, &a, c ^ d ^ e, 0x6ed9_eba1 &+ w2)
        w3 = rotl(w0 ^ w11 ^ w5 ^ w3, 1)
        round(a, &b, &e, b ^ c ^ d, 0x6ed9_eba1 &+ w3)
        w4 = rotl(w1 ^ w12 ^ w6 ^ w4, 1)
        round(e, &a, &d, a ^ b ^ c, 0x6ed9_eba1 &+ w4)
        w5 = rotl(w2 ^ w13 ^ w7 ^ w5, 1)
        round(d, &e, &c, e ^ a ^ b, 0x6ed9_eba1 &+ w5)
        w6 = rotl(w3 ^ w14 ^ w8 ^ w6, 1)
        round(c, &d, &b, d ^ e ^ a, 0x6ed9_eba1 &+ w6)
        w7 = rotl(w4 ^ w15 ^ w9 ^ w7, 1)
        round(b, &c, &a, c ^ d ^ e, 0x6ed9_eba1 &+ w7)
        w8 = rotl(w5 ^ w0 ^ w10 ^ w8, 1)
        round(a, &b, &e, (b & c) | (d & (b | c)), 0x8f1b_bcdc &+ w8)
        w9 = rotl(w6 ^ w1 ^ w11 ^ w9, 1)
        round(e, &a, &d, (a & b) | (c & (a | b)), 0x8f1b_bcdc &+ w9)
        w10 = rotl(w7 ^ w2 ^ w12 ^ w10, 1)
        round(d, &e, &c, (e & a) | (b & (e | a)), 0x8f1b_bcdc &+ w10)
        w11 = rotl(w8 ^ w3 ^ w13 ^ w11, 1)
        round(c, &d, &b, (d & e) | (a & (d | e)), 0x8f1b_bcdc &+ w11)
        w12 = rotl(w9 ^ w4 ^ w14 ^ w12, 1)
        round(b, &c, &a, (c & d) | (e & (c | d)), 0x8f1b_bcdc &+ w12)
        w13 = rotl(w10 ^ w5 ^ w15 ^ w13, 1)
        round(a, &b, &e, (b & c) | (d & (b | c)), 0x8f1b_bcdc &+ w13)
        w14 = rotl(w11 ^ w6 ^ w0 ^ w14, 1)
        round(e, &a, &d, (a & b) | (c & (a | b)), 0x8f1b_bcdc &+ w14)
        w15 = rotl(w12 ^ w7 ^ w1 ^ w15, 1)
        round(d, &e, &c, (e & a) | (b & (e | a)), 0x8f1b_bcdc &+ w15)
        w0 = rotl(w13 ^ w8 ^ w2 ^ w0, 1)
        round(c, &d, &b, (d & e) | (a & (d | e)), 0x8f1b_bcdc &+ w0)
        w1 = rotl(w14 ^ w9 ^ w3 ^ w1, 1)
        round(b, &c, &a, (c & d) | (e & (c | d)), 0x8f1b_bcdc &+ w1)
        w2 = rotl(w15 ^ w10 ^ w4 ^ w2, 1)
        round(a, &b, &e, (b & c) | (d & (b | c)), 0x8f1b_bcdc &+ w2)
        w3 = rotl(w0 ^ w11 ^ w5 ^ w3, 1)
        round(e, &a, &d, (a & b) | (c & (a | b)), 0x8f1b_bcdc &+ w3)
        w4 = rotl(w1 ^ w12 ^ w6 ^ w4, 1)
        round(d, &e, &c, (e & a) | (b & (e | a)), 0x8f1b_bcdc &+ w4)
        w5 = rotl(w2 ^ w13 ^ w7 ^ w5, 1)
        round(c, &d, &b, (d & e) | (a & (d | e)), 0x8f1b_bcdc &+ w5)
        w6 = rotl(w3 ^ w14 ^ w8 ^ w6, 1)
        round(b, &c, &a, (c & d) | (e & (c | d)), 0x8f1b_bcdc &+ w6)
        w7 = rotl(w4 ^ w15 ^ w9 ^ w7, 1)
        round(a, &b, &e, (b & c) | (d & (b | c)), 0x8f1b_bcdc &+ w7)
        w8 = rotl(w5 ^ w0 ^ w10 ^ w8, 1)
        round(e, &a, &d, (a & b) | (c & (a | b)), 0x8f1b_bcdc &+ w8)
        w9 = rotl(w6 ^ w1 ^ w11 ^ w9, 1)
        round(d, &e, &c, (e & a) | (b & (e | a)), 0x8f1b_bcdc &+ w9)
        w10 = rotl(w7 ^ w2 ^ w12 ^ w10, 1)
        round(c, &d, &b, (d & e) | (a & (d | e)), 0x8f1b_bcdc &+ w10)
        w11 = rotl(w8 ^ w3 ^ w13 ^ w11, 1)
        round(b, &c, &a, (c & d) | (e & (c | d)), 0x8f1b_bcdc &+ w11)
        w12 = rotl(w9 ^ w4 ^ w14 ^ w12, 1)
        round(a, &b, &e, b ^ c ^ d, 0xca62_c1d6 &+ w12)
        w13 = rotl(w10 ^ w5 ^ w15 ^ w13, 1)
        round(e, &a, &d, a ^ b ^ c, 0xca62_c1d6 &+ w13)
        w14 = rotl(w11 ^ w6 ^ w0 ^ w14, 1)
        round(d, &e, &c, e ^ a ^ b, 0xca62_c1d6 &+ w14)
        w15 = rotl(w12 ^ w7 ^ w1 ^ w15, 1)
        round(c, &d, &b, d ^ e ^ a, 0xca62_c1d6 &+ w15)
        w0 = rotl(w13 ^ w8 ^ w2 ^ w0, 1)
        round(b, &c, &a, c ^ d ^ e, 0xca62_c1d6 &+ w0)
        w1 = rotl(w14 ^ w9 ^ w3 ^ w1, 1)
        round(a, &b, &e, b ^ c ^ d, 0xca62_c1d6 &+ w1)
        w2 = rotl(w15 ^ w10 ^ w4 ^ w2, 1)
        round(e, &a, &d, a ^ b ^ c, 0xca62_c1d6 &+ w2)
        w3 = rotl(w0 ^ w11 ^ w5 ^ w3, 1)
        round(d, &e, &c, e ^ a ^ b, 0xca62_c1d6 &+ w3)
        w4 = rotl(w1 ^ w12 ^ w6 ^ w4, 1)
        round(c, &d, &b, d ^ e ^ a, 0xca62_c1d6 &+ w4)
        w5 = rotl(w2 ^ w13 ^ w7 ^ w5, 1)
        round(b, &c, &a, c ^ d ^ e, 0xca62_c1d6 &+ w5)
        w6 = rotl(w3 ^ w14 ^ w8 ^ w6, 1)
        round(a, &b, &e, b ^ c ^ d, 0xca62_c1d6 &+ w6)
        w7 = rotl(w4 ^ w15 ^ w9 ^ w7, 1)
        round(e, &a, &d, a ^ b ^ c, 0xca62_c1d6 &+ w7)
        w8 = rotl(w5 ^ w0 ^ w10 ^ w8, 1)
        round(d, &e, &c, e ^ a ^ b, 0xca62_c1d6 &+ w8)
        w9 = rotl(w6 ^ w1 ^ w11 ^ w9, 1)
        round(c, &d, &b, d ^ e ^ a, 0xca62_c1d6 &+ w9)
        w10 = rotl(w7 ^ w2 ^ w12 ^ w10, 1)
        round(b, &c, &a, c ^ d ^ e, 0xca62_c1d6 &+ w10)
        w11 = rotl(w8 ^ w3 ^ w13 ^ w11, 1)
        round(a, &b, &e, b ^ c ^ d, 0xca62_c1d6 &+ w11)
        w12 = rotl(w9 ^ w4 ^ w14 ^ w12, 1)
        round(e, &a, &d, a ^ b ^ c, 0xca62_c1d6 &+ w12)
        w13 = rotl(w10 ^ w5 ^ w15 ^ w13, 1)
        round(d, &e, &c, e ^ a ^ b, 0xca62_c1d6 &+ w13)
        w14 = rotl(w11 ^ w6 ^ w0 ^ w14, 1)
        round(c, &d, &b, d ^ e ^ a, 0xca62_c1d6 &+ w14)
        w15 = rotl(w12 ^ w7 ^ w1 ^ w15, 1)
        round(b, &c, &a, c ^ d ^ e, 0xca62_c1d6 &+ w15)
        state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d, state.4 &+ e)
    }
}
