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
