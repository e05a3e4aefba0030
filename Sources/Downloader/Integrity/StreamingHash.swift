import Foundation

/// One of the hashes the library computes, chosen when a download starts (the caller's expectation, else the best
/// digest the server announces, else MD5), whose state is saved with the partial file.
enum StreamingHash: Sendable, Equatable {
    case md5(MD5)
    case sha1(SHA1)
    case sha256(SHA256)

    /// A fresh hasher.
    init(_ algorithm: Checksum.Algorithm) {
        switch algorithm {
        case .md5: self = .md5(MD5())
        case .sha1: self = .sha1(SHA1())
        case .sha256: self = .sha256(SHA256())
        }
    }

    var algorithm: Checksum.Algorithm {
        switch self {
        case .md5: return .md5
        case .sha1: return .sha1
        case .sha256: return .sha256
        }
    }

    /// How many bytes have been hashed.
    var byteCount: UInt64 {
        switch self {
        case .md5(let hash): return hash.byteCount
        case .sha1(let hash): return hash.byteCount
        case .sha256(let hash): return hash.byteCount
        }
    }

    mutating func update(bufferPointer: UnsafeRawBufferPointer) {
        switch self {
        case .md5(var hash):
            hash.update(bufferPointer: bufferPointer)
            self = .md5(hash)
        case .sha1(var hash):
            hash.update(bufferPointer: bufferPointer)
            self = .sha1(hash)
        case .sha256(var hash):
            hash.update(bufferPointer: bufferPointer)
            self = .sha256(hash)
        }
    }

    /// The checksum of every byte so far (the hasher is not consumed).
    func finalize() -> Checksum {
        switch self {
        case .md5(let hash): return Checksum(algorithm: .md5, digest: hash.finalize().bytes)!
        case .sha1(let hash): return Checksum(algorithm: .sha1, digest: hash.finalize().bytes)!
        case .sha256(let hash): return Checksum(algorithm: .sha256, digest: hash.finalize().bytes)!
        }
    }
}

extension StreamingHash: Codable {
    private enum CodingKeys: String, CodingKey { case algorithm, state }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        switch try container.decode(Checksum.Algorithm.self, forKey: .algorithm) {
        case .md5: self = .md5(try container.decode(MD5.self, forKey: .state))
        case .sha1: self = .sha1(try container.decode(SHA1.self, forKey: .state))
        case .sha256: self = .sha256(try container.decode(SHA256.self, forKey: .state))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(algorithm, forKey: .algorithm)
        switch self {
        case .md5(let hash): try container.encode(hash, forKey: .state)
        case .sha1(let hash): try container.encode(hash, forKey: .state)
        case .sha256(let hash): try container.encode(hash, forKey: .state)
        }
    }
}
