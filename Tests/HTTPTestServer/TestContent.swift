import Downloader
import Foundation

/// Deterministic pseudo-random file contents, derived from a name, a size and a version.
///
/// Any byte range can be produced without the bytes before it, so the server can answer `Range` requests of huge
/// files without storing them, and tests can compute the expected bytes and MD5 independently.
public struct TestContent: Sendable, Hashable {
    /// The resource name (the `NAME` in `/bytes/NAME`).
    public let name: String
    /// The length in bytes.
    public let size: Int
    /// The version: a changed resource has different bytes and validators.
    public let version: Int
    private let seed: UInt64

    /// Creates the description of a resource's contents.
    /// - Parameters:
    ///   - name: the resource name; different names give unrelated bytes.
    ///   - size: the length in bytes.
    ///   - version: which version of the resource; 0 unless the resource changes between requests.
    public init(name: String, size: Int, version: Int = 0) {
        self.name = name
        self.size = size
        self.version = version
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a
        for byte in "\(name)#\(version)".utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        seed = hash
    }

    /// The 8 bytes at word index `index` (bytes `8 * index ..< 8 * index + 8`), little-endian.
    @inline(__always)
    private func word(_ index: Int) -> UInt64 {
        var z = seed &+ UInt64(truncatingIfNeeded: index) &* 0x9e37_79b9_7f4a_7c15
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    /// Writes the bytes starting at `offset` into `buffer` (as many as fit, clipped at `size`).
    /// - Returns: how many bytes were written.
    @discardableResult
    public func fill(_ buffer: UnsafeMutableRawBufferPointer, from offset: Int) -> Int {
        let count = max(0, min(buffer.count, size - offset))
        var position = offset
        var out = 0
        while out < count {
            let w = word(position >> 3)
            let shift = position & 7
            if shift == 0 && count - out >= 8 {
                buffer.storeBytes(of: w.littleEndian, toByteOffset: out, as: UInt64.self)
                out += 8
                position += 8
            } else {
                buffer[out] = UInt8(truncatingIfNeeded: w >> UInt64(8 * shift))
                out += 1
                position += 1
            }
        }
        return count
    }

    /// The bytes in `range`, clipped to the resource.
    public func bytes(in range: Range<Int>) -> [UInt8] {
        let lower = max(0, range.lowerBound)
        let upper = min(size, range.upperBound)
        guard lower < upper else { return [] }
        var out = [UInt8](repeating: 0, count: upper - lower)
        out.withUnsafeMutableBytes { _ = fill($0, from: lower) }
        return out
    }

    /// The whole contents (for small resources).
    public var data: Data { Data(bytes(in: 0..<size)) }

    /// The MD5 of the whole contents, computed in 1 MiB pieces.
    public var md5: Hashing.MD5Digest {
        var hasher = MD5()
        let piece = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: piece, alignment: 8)
        defer { buffer.deallocate() }
        var offset = 0
        while offset < size {
            let count = fill(buffer, from: offset)
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            offset += count
        }
        return hasher.finalize()
    }

    /// `md5` computed on a thread of its own. Use it for large contents: hashing tens of MiB in a debug build takes
    /// seconds, and on a cooperative thread it starves every other test of the suite (two such tests at once held
    /// both threads of a 2-core machine for ~35 s, and signal tests waiting for an event sent their signal too late).
    public var md5OffThePool: Hashing.MD5Digest {
        get async { await RawHTTPClient.onThread { self.md5 } }
    }

    /// The MD5 of a file, read and hashed on a thread of its own (see `md5OffThePool`).
    public static func md5(ofFile url: URL) async throws -> Hashing.MD5Digest {
        try await RawHTTPClient.onThread { Result { MD5.hash(data: try Data(contentsOf: url)) } }.get()
    }

    /// The SHA-256 of the whole contents, computed in 1 MiB pieces.
    public var sha256: Hashing.SHA256Digest {
        var hasher = SHA256()
        let piece = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: piece, alignment: 8)
        defer { buffer.deallocate() }
        var offset = 0
        while offset < size {
            let count = fill(buffer, from: offset)
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            offset += count
        }
        return hasher.finalize()
    }

    /// The strong entity tag the server sends for this version (quoted).
    public var etag: String {
        let text = String(seed ^ UInt64(truncatingIfNeeded: size), radix: 16)
        return "\"\(text)-v\(version)\""
    }

    /// The `Last-Modified` date the server sends: a fixed day, one hour later per version.
    public var lastModified: Date {
        Date(timeIntervalSince1970: 1_700_000_000 + Double(version) * 3600)
    }
}
