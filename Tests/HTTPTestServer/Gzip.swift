/// A minimal gzip encoder (RFC 1952) using stored deflate blocks: valid gzip that any decoder accepts, enough to
/// show what happens when a server compresses a response.
enum Gzip {
    /// Wraps `bytes` in a gzip member with uncompressed ("stored") deflate blocks.
    static func encode(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xff]
        var offset = 0
        repeat {
            let count = min(65_535, bytes.count - offset)
            let final: UInt8 = offset + count == bytes.count ? 1 : 0
            out.append(final)  // BFINAL, BTYPE = 00 (stored)
            let length = UInt16(count)
            out += [UInt8(length & 0xff), UInt8(length >> 8), UInt8(~length & 0xff), UInt8(~length >> 8)]
            out += bytes[offset..<offset + count]
            offset += count
        } while offset < bytes.count
        let crc = crc32(bytes)
        let size = UInt32(truncatingIfNeeded: bytes.count)
        for value in [crc, size] {
            for shift in stride(from: 0, to: 32, by: 8) {
                out.append(UInt8(truncatingIfNeeded: value >> UInt32(shift)))
            }
        }
        return out
    }

    /// CRC-32 (IEEE 802.3, reflected), bit by bit: small inputs only.
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xffff_ffff
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xedb8_8320 : crc >> 1 }
        }
        return ~crc
    }
}
