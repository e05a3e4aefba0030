import Foundation

/// A file's expected or computed digest: the algorithm and its bytes.
///
/// ```swift
/// let expected = Checksum(md5: "9e107d9d372bb6826bd81d3542a419d6")!
/// print(expected)   // md5=9e107d9d372bb6826bd81d3542a419d6
/// ```
public struct Checksum: Sendable, Hashable, CustomStringConvertible {
    /// A digest algorithm the library computes.
    public enum Algorithm: String, Sendable, Hashable, Codable, CaseIterable {
        /// MD5 (RFC 1321): 16 bytes. Fast; checks integrity, not authenticity.
        case md5
        /// SHA-1 (FIPS 180-4): 20 bytes. Broken for signatures; here because mirrors still publish SHA1SUMS.
        case sha1
        /// SHA-256 (FIPS 180-4): 32 bytes. What releases publish today (SHA256SUMS).
        case sha256

        /// The digest's length in bytes.
        public var digestLength: Int {
            switch self {
            case .md5: return 16
            case .sha1: return 20
            case .sha256: return 32
            }
        }

        /// The name in HTTP digest fields and in `dl`'s output: `md5`, `sha-1`, `sha-256`.
        public var fieldName: String {
            switch self {
            case .md5: return "md5"
            case .sha1: return "sha-1"
            case .sha256: return "sha-256"
            }
        }

        /// The algorithm a name denotes, in any of the spellings people and headers use (`sha-256`, `SHA256`,
        /// `sha_256`, `md5`, `SHA-1`, and RFC 3230's `SHA` for SHA-1).
        public init?(name: String) {
            var folded = name.lowercased().filter { $0 != "-" && $0 != "_" }
            if folded == "sha" { folded = "sha1" }  // RFC 3230's name for SHA-1
            guard let algorithm = Algorithm.allCases.first(where: { $0.rawValue == folded }) else { return nil }
            self = algorithm
        }

        /// The algorithm of a digest given as bare hex digits, by their count (32 MD5, 40 SHA-1, 64 SHA-256).
        public init?(hexLength: Int) {
            guard let algorithm = Algorithm.allCases.first(where: { $0.digestLength * 2 == hexLength }) else {
                return nil
            }
            self = algorithm
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

    /// Reads a checksum as people paste it: `sha-256=HEX`, `sha256:HEX`, `SHA256=HEX`, `md5=HEX`, or bare hex digits
    /// whose count names the algorithm (32 MD5, 40 SHA-1, 64 SHA-256). After a name, base64 (`sha-256=:…:` as in
    /// RFC 9530) is accepted too.
    /// - Parameter text: the checksum; surrounding white space is ignored.
    /// - Throws: `DownloadError.invalidChecksum`, saying what is wrong with the text.
    public init(parsing text: String) throws(DownloadError) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let separator = trimmed.firstIndex(where: { $0 == "=" || $0 == ":" }) else {
            guard let algorithm = Algorithm(hexLength: trimmed.count),
                let checksum = Checksum(algorithm: algorithm, hexString: trimmed)
            else {
                throw .invalidChecksum(
                    text, reason: "expected ALGORITHM=HEX or 32, 40 or 64 hex digits (MD5, SHA-1, SHA-256)")
            }
            self = checksum
            return
        }
        let name = String(trimmed[..<separator])
        var value = String(trimmed[trimmed.index(after: separator)...]).trimmingCharacters(in: .whitespaces)
        guard let algorithm = Algorithm(name: name) else {
            throw .invalidChecksum(text, reason: "unknown algorithm \"\(name)\" (md5, sha-1 or sha-256)")
        }
        if let checksum = Checksum(algorithm: algorithm, hexString: value) {
            self = checksum
            return
        }
        if value.hasPrefix(":") && value.hasSuffix(":") && value.count >= 2 {
            value = String(value.dropFirst().dropLast())
        }
        if let bytes = Data(base64Encoded: value), let checksum = Checksum(algorithm: algorithm, digest: bytes) {
            self = checksum
            return
        }
        throw .invalidChecksum(
            text,
            reason:
                "\(algorithm.fieldName) needs \(algorithm.digestLength * 2) hex digits (or base64 of \(algorithm.digestLength) bytes)"
        )
    }

    /// The digest as lowercase hexadecimal digits.
    public var hexString: String { Hex.encode(digest) }

    /// `algorithm=hex` as `init(parsing:)` reads it, for example `sha-256=e3b0…b855`.
    public var description: String { "\(algorithm.fieldName)=\(hexString)" }
}

extension Checksum: Codable {
    /// Decodes the text form (`sha-256=HEX`).
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do {
            try self.init(parsing: text)
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.reason))
        }
    }

    /// Encodes the text form (`sha-256=HEX`).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// What was checked about a completed file.
public enum Verification: Sendable, Hashable, CustomStringConvertible {
    /// The file's checksum was computed and compared with what the caller expected or the server announced.
    case checksum(Checksum)
    /// The file's checksum was computed, but there was nothing to compare it with.
    case computed(Checksum)
    /// Not hashed; only the length the server announced was checked.
    case lengthOnly
    /// Not hashed, and the server announced no length: the response ended cleanly, nothing more is known.
    case unverified

    /// The computed checksum, if any.
    public var checksum: Checksum? {
        switch self {
        case .checksum(let checksum), .computed(let checksum): return checksum
        case .lengthOnly, .unverified: return nil
        }
    }

    /// A few words for people, for example `verified sha-256=…` or `length only`.
    public var description: String {
        switch self {
        case .checksum(let checksum): return "verified \(checksum)"
        case .computed(let checksum): return "computed \(checksum) (nothing to compare with)"
        case .lengthOnly: return "length only (not hashed)"
        case .unverified: return "not verified (no checksum, no length)"
        }
    }
}

extension Verification: Codable {
    /// Decodes the stored form: `checksum sha-256=HEX`, `computed md5=HEX`, `lengthOnly` or `unverified`.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        let parts = text.split(separator: " ", maxSplits: 1).map(String.init)
        switch (parts.first, parts.count == 2 ? try? Checksum(parsing: parts[1]) : nil) {
        case ("checksum", let checksum?): self = .checksum(checksum)
        case ("computed", let checksum?): self = .computed(checksum)
        case ("lengthOnly", nil): self = .lengthOnly
        case ("unverified", nil): self = .unverified
        default:
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "unknown verification \"\(text)\""))
        }
    }

    /// Encodes the stored form (see `init(from:)`).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(storedForm)
    }

    /// `checksum sha-256=HEX`, `computed md5=HEX`, `lengthOnly` or `unverified`.
    var storedForm: String {
        switch self {
        case .checksum(let checksum): return "checksum \(checksum)"
        case .computed(let checksum): return "computed \(checksum)"
        case .lengthOnly: return "lengthOnly"
        case .unverified: return "unverified"
        }
    }
}
