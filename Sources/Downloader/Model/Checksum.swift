/// A file's expected or computed digest: the algorithm and its bytes.
///
/// ```swift
/// let expected = Checksum(md5: "9e107d9d372bb6826bd81d3542a419d6")!
/// print(expected)   // md5=9e107d9d372bb6826bd81d3542a419d6
/// ```
public struct Checksum: Sendable, Hashable, Codable, CustomStringConvertible {
    /// A digest algorithm the library computes.
    public enum Algorithm: String, Sendable, Hashable, Codable, CaseIterable {
        /// MD5 (RFC 1321): 16 bytes.
        case md5

        /// The digest's length in bytes.
        public var digestLength: Int {
            switch self {
            case .md5: return 16
            }
        }
    }

    /// The algorithm.
    public let algorithm: Algorithm
    /// The digest, `algorithm.digestLength` bytes.
    public let digest: [UInt8]

    /// Creates a checksum from its bytes.
    /// - Returns: `nil` when the byte count does not fit the algorithm.
    public init?(algorithm: Algorithm, digest: some Collection<UInt8>) {
        guard digest.count == algorithm.digestLength else { return nil }
        self.algorithm = algorithm
        self.digest = Array(digest)
    }

    /// Creates a checksum from hexadecimal digits (either case, surrounding white space ignored).
    /// - Returns: `nil` when the text is not `2 × digestLength` hex digits.
    public init?(algorithm: Algorithm, hexString: String) {
        guard let bytes = Hex.decode(hexString), let checksum = Checksum(algorithm: algorithm, digest: bytes) else {
            return nil
        }
        self = checksum
    }

    /// An MD5 checksum from 32 hex digits.
    public init?(md5 hexString: String) {
        self.init(algorithm: .md5, hexString: hexString)
    }

    /// The digest as lowercase hexadecimal digits.
    public var hexString: String { Hex.encode(digest) }

    /// `algorithm=hex`, for example `md5=d41d8cd98f00b204e9800998ecf8427e`.
    public var description: String { "\(algorithm.rawValue)=\(hexString)" }
}
