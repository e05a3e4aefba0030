import Foundation

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
