import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// SHA-256 and SHA-1 against FIPS 180-4 / RFC 6234 vectors, every length 0…300 whole, byte by byte and split with
/// the state saved and restored, and a large random buffer against GNU sha256sum / sha1sum.
@Suite("SHA-256 and SHA-1")
struct SHATests {
    static let vectors: [(input: String, repeats: Int, sha256: String, sha1: String)] = [
        (
            "", 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "da39a3ee5e6b4b0d3255bfef95601890afd80709"
        ),
        (
            "abc", 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        ),
        (
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        ),
        (
            "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
            1,
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1",
            "a49b2446a02c645bf419f995b67091253a04a259"
        ),
        (
            "a", 1_000_000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
            "34aa973cd4c4daa4f61eeb2bdbad27316534016f"
        ),
        (
            "0123456701234567012345670123456701234567012345670123456701234567", 10,
            "594847328451bdfa85056225462cc1d867d877fb388df0ce35f25ab5562bfbb5",
            "dea356a2cddd90c7a7ecedc5ebb563934f460452"
        ),
    ]

    @Test("FIPS 180-4 and RFC 6234 vectors, one million 'a' included")
    func vectors() {
        for vector in Self.vectors {
            let data = Data(String(repeating: vector.input, count: vector.repeats).utf8)
            #expect(SHA256.hash(data: data).hexString == vector.sha256, "\(vector.input.prefix(8))")
            #expect(SHA1.hash(data: data).hexString == vector.sha1, "\(vector.input.prefix(8))")
        }
    }
}

/// Plain, array-based SHA-256 straight from FIPS 180-4, used as an independent oracle.
private func referenceSHA256(_ message: [UInt8]) -> String {
    let k: [UInt32] = sha256RoundConstants  // the constants are data, checked by the vectors above
    var h: [UInt32] = [
        0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19,
    ]
    func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }
    let padded = paddedSHA(message)
    for chunk in stride(from: 0, to: padded.count, by: 64) {
        var w = (0..<16).map { i in (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(padded[chunk + 4 * i + $1]) } }
        for i in 16..<64 {
            let s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3)
            let s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10)
            w.append(w[i - 16] &+ s0 &+ w[i - 7] &+ s1)
        }
        var v = h
        for i in 0..<64 {
            let s1 = rotr(v[4], 6) ^ rotr(v[4], 11) ^ rotr(v[4], 25)
            let ch = (v[4] & v[5]) ^ (~v[4] & v[6])
            let t1 = v[7] &+ s1 &+ ch &+ k[i] &+ w[i]
            let s0 = rotr(v[0], 2) ^ rotr(v[0], 13) ^ rotr(v[0], 22)
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2])
            v = [t1 &+ s0 &+ maj, v[0], v[1], v[2], v[3] &+ t1, v[4], v[5], v[6]]
        }
        h = zip(h, v).map { $0 &+ $1 }
    }
    return h.map { String(format: "%08x", $0) }.joined()
}

/// Plain, array-based SHA-1 straight from FIPS 180-4.
private func referenceSHA1(_ message: [UInt8]) -> String {
    var h: [UInt32] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476, 0xc3d2_e1f0]
    func rotl(_ x: UInt32, _ n: UInt32) -> UInt32 { (x << n) | (x >> (32 - n)) }
    let padded = paddedSHA(message)
    for chunk in stride(from: 0, to: padded.count, by: 64) {
        var w = (0..<16).map { i in (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(padded[chunk + 4 * i + $1]) } }
        for i in 16..<80 { w.append(rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1)) }
        var (a, b, c, d, e) = (h[0], h[1], h[2], h[3], h[4])
        for i in 0..<80 {
            let (f, k): (UInt32, UInt32) =
                switch i {
                case 0..<20: ((b & c) | (~b & d), 0x5a82_7999)
                case 20..<40: (b ^ c ^ d, 0x6ed9_eba1)
                case 40..<60: ((b & c) | (b & d) | (c & d), 0x8f1b_bcdc)
                default: (b ^ c ^ d, 0xca62_c1d6)
                }
            (a, b, c, d, e) = (rotl(a, 5) &+ f &+ e &+ k &+ w[i], a, rotl(b, 30), c, d)
        }
        h = zip(h, [a, b, c, d, e]).map { $0 &+ $1 }
    }
    return h.map { String(format: "%08x", $0) }.joined()
}

/// The message with SHA padding: 0x80, zeros to 56 mod 64, the bit length big-endian.
private func paddedSHA(_ message: [UInt8]) -> [UInt8] {
    var padded = message + [0x80]
    while padded.count % 64 != 56 { padded.append(0) }
    let bits = UInt64(message.count) * 8
    for i in (0..<8).reversed() { padded.append(UInt8(truncatingIfNeeded: bits >> (8 * UInt64(i)))) }
    return padded
}

/// The operations both hashers share, so that one test body checks both.
private protocol TestedHash: Codable, Equatable {
    associatedtype Digest: HashDigest
    init()
    mutating func update(data: some DataProtocol)
    mutating func update(bufferPointer: UnsafeRawBufferPointer)
    func finalize() -> Digest
    static func hash(data: some DataProtocol) -> Digest
}

extension SHA256: TestedHash {}
extension SHA1: TestedHash {}

extension SHATests {
    @Test("Every length from 0 to 300 agrees with the reference: whole, byte by byte, split and restored")
    func everyLength() throws {
        try check(SHA256.self, reference: referenceSHA256)
        try check(SHA1.self, reference: referenceSHA1)
    }

    private func check<H: TestedHash>(_: H.Type, reference: ([UInt8]) -> String) throws {
        let source = pseudoRandomBytes(count: 300, seed: 42)
        for length in 0...300 {
            let message = Array(source.prefix(length))
            let expected = reference(message)
            #expect(H.hash(data: message).hexString == expected, "\(H.self) whole, length \(length)")
            var bytewise = H()
            for byte in message { bytewise.update(data: [byte]) }
            #expect(bytewise.finalize().hexString == expected, "\(H.self) byte by byte, length \(length)")
            for split in Set([0, 1, 55, 56, 63, 64, 65, 127, 128, length / 2, length]) where split <= length {
                var first = H()
                first.update(data: message[..<split])
                var restored = try JSONDecoder().decode(H.self, from: JSONEncoder().encode(first))
                #expect(restored == first)
                restored.update(data: message[split...])
                #expect(restored.finalize().hexString == expected, "\(H.self) split at \(split), length \(length)")
                #expect(first.finalize() == first.finalize(), "finalize does not consume")
            }
        }
    }

    @Test("A corrupt saved state is rejected, not trusted")
    func corruptState() {
        let decoder = JSONDecoder()
        let wrongWords = Data(#"{"byteCount":0,"pending":"","words":[1,2,3]}"#.utf8)
        let wrongPending = Data(#"{"byteCount":3,"pending":"YQ==","words":[1,2,3,4,5,6,7,8]}"#.utf8)
        #expect(throws: DecodingError.self) { try decoder.decode(SHA256.self, from: wrongWords) }
        #expect(throws: DecodingError.self) { try decoder.decode(SHA256.self, from: wrongPending) }
        #expect(throws: DecodingError.self) { try decoder.decode(SHA1.self, from: wrongWords) }
    }

    @Test(
        "A large random buffer agrees with sha256sum and sha1sum",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sha256sum")))
    func largeBuffer() throws {
        let bytes = pseudoRandomBytes(count: 8 << 20 | 37, seed: 2026)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sha-\(UUID().uuidString)")
        try Data(bytes).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        var sha256 = SHA256()
        var sha1 = SHA1()
        var offset = 0
        var chunk = 1
        while offset < bytes.count {  // uneven chunk sizes cross block boundaries in every way
            let end = min(bytes.count, offset + chunk)
            bytes[offset..<end].withUnsafeBytes {
                sha256.update(bufferPointer: $0)
                sha1.update(bufferPointer: $0)
            }
            offset = end
            chunk = chunk * 7 % 100_003 + 1
        }
        #expect(try systemDigest("/usr/bin/sha256sum", of: file) == sha256.finalize().hexString)
        #expect(try systemDigest("/usr/bin/sha1sum", of: file) == sha1.finalize().hexString)
    }

    @Test("Digests parse hex in either case and base64, and reject other lengths")
    func digests() throws {
        let digest = SHA256.hash(data: Data("abc".utf8))
        #expect(SHA256Digest(hexString: " " + digest.hexString.uppercased() + "\n") == digest)
        #expect(SHA256Digest(base64: digest.base64String) == digest)
        #expect(SHA256Digest(hexString: String(digest.hexString.dropLast(2))) == nil)
        #expect(SHA1Digest(hexString: digest.hexString) == nil)
        #expect(SHA1Digest(base64: "not base64!") == nil)
    }
}
