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

// The SHA-256 block function (FIPS 180-4 §6.2), unrolled: 64 rounds over eight working variables whose roles rotate
// by name instead of by moving values, and a 16-word message schedule computed in place as the rounds need it.
//
// Performance notes (Linux x86_64, Swift 6.3, no SHA extensions, like GNU sha256sum): the round constants come
// from a table through a pointer, as in MD5 (literals let LLVM move `+ K` onto the critical path); one block per
// out-of-line call keeps the schedule words in registers.

/// The 64 round constants of FIPS 180-4 §4.2.2.
let sha256RoundConstants: [UInt32] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5,
    0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
    0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3,
    0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5,
    0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]

@inline(__always)
private func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x &>> n) | (x &<< (32 &- n)) }

/// One round: `d += t1`, `h = t1 + t2`, where the caller rotates the roles of the eight variables.
///
/// The Σ functions are written as nested rotations, `Σ1(e) = rotr(rotr(rotr(e, 14) ^ e, 5) ^ e, 6)`: x86 rotates
/// overwrite their operand, so three rotations of one value cost three copies, nested ones one. `h + K + W` is added
/// first (all are known a round early), so only Σ1 and Ch of the newest `e` sit on the critical path. `Maj(a, b, c)`
/// is `b ^ ((a ^ b) & (b ^ c))`, and this round's `a ^ b` is the next round's `b ^ c`: `bc` carries it over.
@inline(__always)
private func round(
    _ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: inout UInt32, _ e: UInt32, _ f: UInt32, _ g: UInt32,
    _ h: inout UInt32, _ kw: UInt32, _ bc: inout UInt32
) {
    let sigma1 = rotr(rotr(rotr(e, 14) ^ e, 5) ^ e, 6)
    let t1 = ((h &+ kw) &+ (g ^ (e & (f ^ g)))) &+ sigma1
    let ab = a ^ b
    let sigma0 = rotr(rotr(rotr(a, 9) ^ a, 11) ^ a, 2)
    let t2 = sigma0 &+ (b ^ (ab & bc))
    bc = ab
    d = d &+ t1
    h = t1 &+ t2
}

/// The next schedule word `w[i] = σ1(w[i-2]) + w[i-7] + σ0(w[i-15]) + w[i-16]`, with nested rotations.
@inline(__always)
private func schedule(_ w16: UInt32, _ w15: UInt32, _ w7: UInt32, _ w2: UInt32) -> UInt32 {
    let s0 = rotr(rotr(w15, 11) ^ w15, 7) ^ (w15 &>> 3)
    let s1 = rotr(rotr(w2, 2) ^ w2, 17) ^ (w2 &>> 10)
    return w16 &+ s0 &+ w7 &+ s1
}

extension SHA256 {
    /// Hashes `blockCount` whole 64-byte blocks starting at `base` into the chaining state.
    static func compress(_ state: inout Words, blocks base: UnsafeRawPointer, count blockCount: Int) {
        sha256RoundConstants.withUnsafeBufferPointer { table in
            var p = base
            for _ in 0..<blockCount {
                compressBlock(&state, p, table.baseAddress!)
                p += 64
            }
        }
    }

    @inline(never)
    private static func compressBlock(_ state: inout Words, _ p: UnsafeRawPointer, _ k: UnsafePointer<UInt32>) {
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
        var (a, b, c, d, e, f, g, h) = state
        var bc = b ^ c
        round(a, b, c, &d, e, f, g, &h, k[0] &+ w0, &bc)
        round(h, a, b, &c, d, e, f, &g, k[1] &+ w1, &bc)
        round(g, h, a, &b, c, d, e, &f, k[2] &+ w2, &bc)
        round(f, g, h, &a, b, c, d, &e, k[3] &+ w3, &bc)
        round(e, f, g, &h, a, b, c, &d, k[4] &+ w4, &bc)
        round(d, e, f, &g, h, a, b, &c, k[5] &+ w5, &bc)
        round(c, d, e, &f, g, h, a, &b, k[6] &+ w6, &bc)
        round(b, c, d, &e, f, g, h, &a, k[7] &+ w7, &bc)
        round(a, b, c, &d, e, f, g, &h, k[8] &+ w8, &bc)
        round(h, a, b, &c, d, e, f, &g, k[9] &+ w9, &bc)
        round(g, h, a, &b, c, d, e, &f, k[10] &+ w10, &bc)
        round(f, g, h, &a, b, c, d, &e, k[11] &+ w11, &bc)
        round(e, f, g, &h, a, b, c, &d, k[12] &+ w12, &bc)
        round(d, e, f, &g, h, a, b, &c, k[13] &+ w13, &bc)
        round(c, d, e, &f, g, h, a, &b, k[14] &+ w14, &bc)
        round(b, c, d, &e, f, g, h, &a, k[15] &+ w15, &bc)
        w0 = schedule(w0, w1, w9, w14)
        round(a, b, c, &d, e, f, g, &h, k[16] &+ w0, &bc)
        w1 = schedule(w1, w2, w10, w15)
        round(h, a, b, &c, d, e, f, &g, k[17] &+ w1, &bc)
        w2 = schedule(w2, w3, w11, w0)
        round(g, h, a, &b, c, d, e, &f, k[18] &+ w2, &bc)
        w3 = schedule(w3, w4, w12, w1)
        round(f, g, h, &a, b, c, d, &e, k[19] &+ w3, &bc)
        w4 = schedule(w4, w5, w13, w2)
        round(e, f, g, &h, a, b, c, &d, k[20] &+ w4, &bc)
        w5 = schedule(w5, w6, w14, w3)
        round(d, e, f, &g, h, a, b, &c, k[21] &+ w5, &bc)
        w6 = schedule(w6, w7, w15, w4)
        round(c, d, e, &f, g, h, a, &b, k[22] &+ w6, &bc)
        w7 = schedule(w7, w8, w0, w5)
        round(b, c, d, &e, f, g, h, &a, k[23] &+ w7, &bc)
        w8 = schedule(w8, w9, w1, w6)
        round(a, b, c, &d, e, f, g, &h, k[24] &+ w8, &bc)
        w9 = schedule(w9, w10, w2, w7)
        round(h, a, b, &c, d, e, f, &g, k[25] &+ w9, &bc)
        w10 = schedule(w10, w11, w3, w8)
        round(g, h, a, &b, c, d, e, &f, k[26] &+ w10, &bc)
        w11 = schedule(w11, w12, w4, w9)
        round(f, g, h, &a, b, c, d, &e, k[27] &+ w11, &bc)
        w12 = schedule(w12, w13, w5, w10)
        round(e, f, g, &h, a, b, c, &d, k[28] &+ w12, &bc)
        w13 = schedule(w13, w14, w6, w11)
        round(d, e, f, &g, h, a, b, &c, k[29] &+ w13, &bc)
        w14 = schedule(w14, w15, w7, w12)
        round(c, d, e, &f, g, h, a, &b, k[30] &+ w14, &bc)
        w15 = schedule(w15, w0, w8, w13)
        round(b, c, d, &e, f, g, h, &a, k[31] &+ w15, &bc)
        w0 = schedule(w0, w1, w9, w14)
        round(a, b, c, &d, e, f, g, &h, k[32] &+ w0, &bc)
        w1 = schedule(w1, w2, w10, w15)
        round(h, a, b, &c, d, e, f, &g, k[33] &+ w1, &bc)
        w2 = schedule(w2, w3, w11, w0)
        round(g, h, a, &b, c, d, e, &f, k[34] &+ w2, &bc)
        w3 = schedule(w3, w4, w12, w1)
        round(f, g, h, &a, b, c, d, &e, k[35] &+ w3, &bc)
        w4 = schedule(w4, w5, w13, w2)
        round(e, f, g, &h, a, b, c, &d, k[36] &+ w4, &bc)
        w5 = schedule(w5, w6, w14, w3)
        round(d, e, f, &g, h, a, b, &c, k[37] &+ w5, &bc)
        w6 = schedule(w6, w7, w15, w4)
        round(c, d, e, &f, g, h, a, &b, k[38] &+ w6, &bc)
        w7 = schedule(w7, w8, w0, w5)
        round(b, c, d, &e, f, g, h, &a, k[39] &+ w7, &bc)
        w8 = schedule(w8, w9, w1, w6)
        round(a, b, c, &d, e, f, g, &h, k[40] &+ w8, &bc)
        w9 = schedule(w9, w10, w2, w7)
        round(h, a, b, &c, d, e, f, &g, k[41] &+ w9, &bc)
        w10 = schedule(w10, w11, w3, w8)
        round(g, h, a, &b, c, d, e, &f, k[42] &+ w10, &bc)
        w11 = schedule(w11, w12, w4, w9)
        round(f, g, h, &a, b, c, d, &e, k[43] &+ w11, &bc)
        w12 = schedule(w12, w13, w5, w10)
        round(e, f, g, &h, a, b, c, &d, k[44] &+ w12, &bc)
        w13 = schedule(w13, w14, w6, w11)
        round(d, e, f, &g, h, a, b, &c, k[45] &+ w13, &bc)
        w14 = schedule(w14, w15, w7, w12)
        round(c, d, e, &f, g, h, a, &b, k[46] &+ w14, &bc)
        w15 = schedule(w15, w0, w8, w13)
        round(b, c, d, &e, f, g, h, &a, k[47] &+ w15, &bc)
        w0 = schedule(w0, w1, w9, w14)
        round(a, b, c, &d, e, f, g, &h, k[48] &+ w0, &bc)
        w1 = schedule(w1, w2, w10, w15)
        round(h, a, b, &c, d, e, f, &g, k[49] &+ w1, &bc)
        w2 = schedule(w2, w3, w11, w0)
        round(g, h, a, &b, c, d, e, &f, k[50] &+ w2, &bc)
        w3 = schedule(w3, w4, w12, w1)
        round(f, g, h, &a, b, c, d, &e, k[51] &+ w3, &bc)
        w4 = schedule(w4, w5, w13, w2)
        round(e, f, g, &h, a, b, c, &d, k[52] &+ w4, &bc)
        w5 = schedule(w5, w6, w14, w3)
        round(d, e, f, &g, h, a, b, &c, k[53] &+ w5, &bc)
        w6 = schedule(w6, w7, w15, w4)
        round(c, d, e, &f, g, h, a, &b, k[54] &+ w6, &bc)
        w7 = schedule(w7, w8, w0, w5)
        round(b, c, d, &e, f, g, h, &a, k[55] &+ w7, &bc)
        w8 = schedule(w8, w9, w1, w6)
        round(a, b, c, &d, e, f, g, &h, k[56] &+ w8, &bc)
        w9 = schedule(w9, w10, w2, w7)
        round(h, a, b, &c, d, e, f, &g, k[57] &+ w9, &bc)
        w10 = schedule(w10, w11, w3, w8)
        round(g, h, a, &b, c, d, e, &f, k[58] &+ w10, &bc)
        w11 = schedule(w11, w12, w4, w9)
        round(f, g, h, &a, b, c, d, &e, k[59] &+ w11, &bc)
        w12 = schedule(w12, w13, w5, w10)
        round(e, f, g, &h, a, b, c, &d, k[60] &+ w12, &bc)
        w13 = schedule(w13, w14, w6, w11)
        round(d, e, f, &g, h, a, b, &c, k[61] &+ w13, &bc)
        w14 = schedule(w14, w15, w7, w12)
        round(c, d, e, &f, g, h, a, &b, k[62] &+ w14, &bc)
        w15 = schedule(w15, w0, w8, w13)
        round(b, c, d, &e, f, g, h, &a, k[63] &+ w15, &bc)
        state = (
            state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d, state.4 &+ e, state.5 &+ f, state.6 &+ g,
            state.7 &+ h
        )
    }
}
