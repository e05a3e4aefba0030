import Foundation

/// The 16-byte result of an MD5 hash.
public struct MD5Digest: Sendable, Hashable, CustomStringConvertible {
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
            for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: word >> UInt32(shift))) }
        }
        bytes = out
    }

    /// Parses 32 hexadecimal digits, in either case, ignoring surrounding white space.
    /// - Parameter hexString: for example `"d41d8cd98f00b204e9800998ecf8427e"`.
    public init?(hexString: String) {
        guard let bytes = Hex.decode(hexString), bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    /// Parses the base64 form used by the `Content-MD5` header (RFC 1864) and by `Digest: md5=` (RFC 3230).
    /// - Parameter base64: 24 characters of base64 encoding 16 bytes.
    public init?(base64: String) {
        let trimmed = base64.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let data = Data(base64Encoded: trimmed), data.count == 16 else { return nil }
        bytes = Array(data)
    }

    /// The digest as 32 lowercase hexadecimal digits.
    public var hexString: String { Hex.encode(bytes) }

    /// The digest in base64, as sent in a `Content-MD5` header.
    public var base64String: String { Data(bytes).base64EncodedString() }

    public var description: String { hexString }
}
