import Foundation
import Testing

@testable import Downloader

/// A deliberately plain, table-driven MD5 written straight from RFC 1321, used as an independent oracle.
private func referenceMD5(_ message: [UInt8]) -> String {
    let s: [UInt32] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
        5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
        4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
        6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
    ]
    let k = (0..<64).map { UInt32(truncatingIfNeeded: Int64(abs(sin(Double($0 + 1))) * 4_294_967_296)) }
    var h: [UInt32] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476]
    var padded = message + [0x80]
    while padded.count % 64 != 56 { padded.append(0) }
    let bits = UInt64(message.count) * 8
    for i in 0..<8 { padded.append(UInt8(truncatingIfNeeded: bits >> (8 * UInt64(i)))) }
    for chunk in stride(from: 0, to: padded.count, by: 64) {
        let m = (0..<16).map { i in
            (0..<4).reduce(UInt32(0)) { $0 | UInt32(padded[chunk + 4 * i + $1]) << (8 * UInt32($1)) }
        }
        var (a, b, c, d) = (h[0], h[1], h[2], h[3])
        for i in 0..<64 {
            var f: UInt32
            var g: Int
            switch i {
            case 0..<16: f = (b & c) | (~b & d); g = i
            case 16..<32: f = (d & b) | (~d & c); g = (5 * i + 1) % 16
            case 32..<48: f = b ^ c ^ d; g = (3 * i + 5) % 16
            default: f = c ^ (b | ~d); g = (7 * i) % 16
            }
            f = f &+ a &+ k[i] &+ m[g]
            a = d
            d = c
            c = b
            b = b &+ ((f << s[i]) | (f >> (32 - s[i])))
        }
        h[0] = h[0] &+ a; h[1] = h[1] &+ b; h[2] = h[2] &+ c; h[3] = h[3] &+ d
    }
    return h.flatMap { w in (0..<4).map { UInt8(truncatingIfNeeded: w >> (8 * UInt32($0))) } }
        .map { String(format: "%02x", $0) }.joined()
}

@Suite("MD5")
struct MD5Tests {
    @Test(
        "The RFC 1321 test suite hashes to the published digests",
        arguments: [
            ("", "d41d8cd98f00b204e9800998ecf8427e"),
            ("a", "0cc175b9c0f1b6a831c399e269772661"),
            ("abc", "900150983cd24fb0d6963f7d28e17f72"),
            ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            ("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
            ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"),
            (
                "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a"
            ),
        ])
    func rfc1321Suite(input: String, expected: String) {
        #expect(MD5.hash(data: Array(input.utf8)).hexString == expected)
        #expect(MD5.hash(data: Data(input.utf8)).description == expected)
    }

    @Test("Every length from 0 to 300 agrees with the reference, hashed whole, byte by byte and split")
    func everyLengthAgreesWithReference() throws {
        let source = pseudoRandomBytes(count: 300, seed: 42)
        let encoder = JSONEncoder()
        let decoder = JSONDecoder()
        for length in 0...300 {
            let message = Array(source.prefix(length))
            let expected = referenceMD5(message)
            #expect(MD5.hash(data: message).hexString == expected, "whole, length \(length)")

            var bytewise = MD5()
            for byte in message { bytewise.update(data: [byte]) }
            #expect(bytewise.finalize().hexString == expected, "byte by byte, length \(length)")

            for split in Set([0, 1, 55, 56, 63, 64, 65, 127, 128, length / 2, length]) where split <= length {
                var first = MD5()
                first.update(data: message[..<split])
                let saved = try encoder.encode(first)
                var restored = try decoder.decode(MD5.self, from: saved)
                #expect(restored == first)
                restored.update(data: message[split...])
                #expect(restored.finalize().hexString == expected, "split at \(split), length \(length)")
            }
        }
    }

    @Test("finalize does not consume the hasher, so hashing can continue")
    func finalizeIsNotConsuming() {
        var md5 = MD5()
        md5.update(data: Array("abc".utf8))
        #expect(md5.finalize().hexString == "900150983cd24fb0d6963f7d28e17f72")
        md5.update(data: Array("defghijklmnopqrstuvwxyz".utf8))
        #expect(md5.finalize().hexString == "c3fcd3d76192e4007dfb496cca67e13b")
        #expect(md5.byteCount == 26)
    }

    @Test("A state saved by another process continues to the same digest")
    func stateSavedByAnotherProcessRestores() throws {
        // Saved after hashing the first 100 bytes of "The quick brown fox …" repeated;
        // the format is part of the receipts on disk, so it must stay readable.
        let message = Array(String(repeating: "The quick brown fox jumps over the lazy dog. ", count: 5).utf8)
        var first = MD5()
        first.update(data: message.prefix(100))
        let json = String(decoding: try JSONEncoder().encode(first), as: UTF8.self)
        let golden =
            #"{"byteCount":100,"pending":"IGp1bXBzIG92ZXIgdGhlIGxhenkgZG9nLiBUaGUgcXVpY2sg","words":[1815447213,2148281141,1388330779,616816139]}"#
        let decoded = try JSONDecoder().decode(MD5.self, from: Data(golden.utf8))
        #expect(decoded == first, "encoded today: \(json)")
        var restored = decoded
        restored.update(data: message.dropFirst(100))
        #expect(restored.finalize().hexString == referenceMD5(message))
    }

    @Test("A corrupt saved state is rejected, not trusted")
    func corruptStateIsRejected() {
        let wrongPending = #"{"byteCount":3,"pending":"YQ==","words":[1,2,3,4]}"#
        let wrongWords = #"{"byteCount":0,"pending":"","words":[1,2,3]}"#
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(MD5.self, from: Data(wrongPending.utf8)) }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(MD5.self, from: Data(wrongWords.utf8)) }
    }

    @Test("Non-contiguous DataProtocol input hashes like the contiguous bytes")
    func nonContiguousInput() {
        let bytes = pseudoRandomBytes(count: 1000, seed: 7)
        let dispatchData = bytes.withUnsafeBytes { buffer -> DispatchData in
            var combined = DispatchData(bytes: UnsafeRawBufferPointer(rebasing: buffer[..<333]))
            combined.append(DispatchData(bytes: UnsafeRawBufferPointer(rebasing: buffer[333...])))
            return combined
        }
        #expect(dispatchData.regions.count == 2)
        #expect(MD5.hash(data: dispatchData) == MD5.hash(data: bytes))
    }

    @Test(
        "A large random buffer agrees with /usr/bin/md5sum",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/md5sum")))
    func largeBufferAgreesWithMD5Sum() throws {
        let bytes = pseudoRandomBytes(count: 8 << 20 | 37, seed: 2024)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("md5-\(UUID().uuidString)")
        try Data(bytes).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }

        let md5sum = try systemDigest("/usr/bin/md5sum", of: file)

        var streamed = MD5()
        var offset = 0
        var chunk = 1
        while offset < bytes.count {  // uneven chunk sizes cross block boundaries in every way
            let end = min(bytes.count, offset + chunk)
            bytes[offset..<end].withUnsafeBytes { streamed.update(bufferPointer: $0) }
            offset = end
            chunk = chunk * 7 % 100_003 + 1
        }
        #expect(md5sum == MD5.hash(data: bytes).hexString)
        #expect(md5sum == streamed.finalize().hexString)
    }
}

@Suite("MD5Digest")
struct MD5DigestTests {
    @Test("Hex strings round-trip and accept upper case and surrounding space")
    func hexRoundTrip() throws {
        let digest = try #require(MD5Digest(hexString: " D41D8CD98F00B204E9800998ECF8427E\n"))
        #expect(digest.hexString == "d41d8cd98f00b204e9800998ecf8427e")
        #expect(digest == MD5.hash(data: [UInt8]()))
    }

    @Test(
        "Malformed hex strings are rejected",
        arguments: [
            "", "d41d", "g41d8cd98f00b204e9800998ecf8427e",
            "d41d8cd98f00b204e9800998ecf8427e00",
        ])
    func malformedHexIsRejected(text: String) {
        #expect(MD5Digest(hexString: text) == nil)
    }

    @Test("The base64 form of Content-MD5 parses to the same digest")
    func base64ContentMD5() throws {
        let digest = try #require(MD5Digest(base64: "1B2M2Y8AsgTpgAmY7PhCfg=="))
        #expect(digest.hexString == "d41d8cd98f00b204e9800998ecf8427e")
        #expect(digest.base64String == "1B2M2Y8AsgTpgAmY7PhCfg==")
        #expect(MD5Digest(base64: "AAAA") == nil)
    }
}
