import Foundation

extension Hashing {
    /// What the digests of `MD5`, `SHA1` and `SHA256` share: a fixed number of bytes, shown as lowercase hex, parsed from
    /// hex or base64 (the forms of `md5sum`/`sha256sum` output and of `Content-MD5` / `Digest` / `Repr-Digest` headers).
    public protocol Digest: Sendable, Hashable, CustomStringConvertible {
        /// The digest's length in bytes.
        static var byteCount: Int { get }
        /// The digest in its canonical byte order (as printed by `md5sum`, `sha256sum`, …).
        var bytes: [UInt8] { get }
        /// Creates a digest from exactly `byteCount` bytes; any other count returns `nil`.
        init?(bytes: some Collection<UInt8>)
    }
}

extension HashDigest {
    /// Parses hexadecimal digits, in either case, ignoring surrounding white space.
    /// - Parameter hexString: `2 × byteCount` hex digits.
    public init?(hexString: String) {
        guard let bytes = Hex.decode(hexString) else { return nil }
        self.init(bytes: bytes)
    }

    /// Parses base64, as headers carry digests.
    /// - Parameter base64: the base64 encoding of `byteCount` bytes.
    public init?(base64: String) {
        guard let data = Data(base64Encoded: base64.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            return nil
        }
        self.init(bytes: data)
    }

    /// The digest as lowercase hexadecimal digits.
    public var hexString: String { Hex.encode(bytes) }

    /// The digest in base64, as headers carry it.
    public var base64String: String { Data(bytes).base64EncodedString() }

    public var description: String { hexString }
}

extension Hashing {
    /// The 32-byte result of a SHA-256 hash.
    public struct SHA256Digest: Digest {
        public static let byteCount = 32
        public let bytes: [UInt8]

        public init?(bytes: some Collection<UInt8>) {
            guard bytes.count == Self.byteCount else { return nil }
            self.bytes = Array(bytes)
        }
    }
}

extension Hashing {
    /// The 20-byte result of a SHA-1 hash.
    public struct SHA1Digest: Digest {
        public static let byteCount = 20
        public let bytes: [UInt8]

        public init?(bytes: some Collection<UInt8>) {
            guard bytes.count == Self.byteCount else { return nil }
            self.bytes = Array(bytes)
        }
    }
}

/// The digest bytes of big-endian chaining words (the SHA family).
func bigEndianBytes(_ words: [UInt32]) -> [UInt8] {
    var out = [UInt8]()
    out.reserveCapacity(words.count * 4)
    for word in words {
        out += [UInt8(truncatingIfNeeded: word >> 24), UInt8(truncatingIfNeeded: word >> 16)]
        out += [UInt8(truncatingIfNeeded: word >> 8), UInt8(truncatingIfNeeded: word)]
    }
    return out
}

/// Hexadecimal text of bytes.
enum Hex {
    /// Lowercase hex digits of `bytes`.
    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of an even number of hex digits (either case), white space around them ignored.
    static func decode(_ text: String) -> [UInt8]? {
        var utf8 = Substring(text).utf8[...]
        while let first = utf8.first, first == 0x20 || first == 0x09 || first == 0x0a || first == 0x0d {
            utf8 = utf8.dropFirst()
        }
        while let last = utf8.last, last == 0x20 || last == 0x09 || last == 0x0a || last == 0x0d {
            utf8 = utf8.dropLast()
        }
        guard utf8.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(utf8.count / 2)
        var high: UInt8?
        for character in utf8 {
            guard let nibble = nibble(character) else { return nil }
            if let h = high {
                out.append(h << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
