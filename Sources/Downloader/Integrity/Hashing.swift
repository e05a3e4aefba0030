import Foundation

/// The hash functions this package verifies downloads with, written here (no dependency): MD5, SHA-1 and SHA-256,
/// streaming (`update` as bytes arrive, `finalize` at the end), with their digests.
///
/// They live in this namespace so that a file that also imports swift-crypto or CryptoKit, whose `SHA256`,
/// `SHA256Digest` and `Insecure.MD5` are the usual choice for hashing, keeps those names unambiguous:
/// `Hashing.SHA256` is this package's. Downloads do not need them: `Checksum` is what the API takes and returns.
public enum Hashing {}

// The short names inside the module (invisible to importers).
typealias MD5 = Hashing.MD5
typealias SHA1 = Hashing.SHA1
typealias SHA256 = Hashing.SHA256
typealias MD5Digest = Hashing.MD5Digest
typealias SHA1Digest = Hashing.SHA1Digest
typealias SHA256Digest = Hashing.SHA256Digest
typealias HashDigest = Hashing.Digest

extension Hashing {
    /// The shape every hasher of this package shares — swift-crypto's `HashFunction`, plus a state that is `Codable`
    /// (saved beside a partial file, a resume continues the hash without reading the file again), which swift-crypto's
    /// hashers do not offer.
    ///
    /// ```swift
    /// var sha = Hashing.SHA256()
    /// sha.update(data: firstChunk)
    /// sha.update(data: secondChunk)
    /// print(sha.finalize())   // 64 lowercase hex digits
    /// ```
    public protocol HashFunction: Sendable, Codable, Equatable {
        /// What `finalize()` returns.
        associatedtype Digest: Sendable
        /// Creates a hasher with the algorithm's initial state.
        init()
        /// How many bytes have been hashed so far.
        var byteCount: UInt64 { get }
        /// Adds the bytes of a raw buffer to the hash; whole blocks are read from it in place.
        /// - Parameter bufferPointer: the bytes.
        mutating func update(bufferPointer: UnsafeRawBufferPointer)
        /// Returns the digest of every byte added so far, without consuming the hasher: more bytes may follow.
        /// - Returns: the digest.
        func finalize() -> Digest
    }
}

extension Hashing.HashFunction {
    /// Adds bytes to the hash.
    /// - Parameter data: the bytes, in any `DataProtocol` shape (`Data`, `[UInt8]`, a slice, …).
    public mutating func update(data: some DataProtocol) {
        for region in data.regions {
            region.withUnsafeBytes { update(bufferPointer: $0) }
        }
    }

    /// Hashes bytes in one call.
    /// - Parameter data: the bytes to hash.
    /// - Returns: their digest.
    public static func hash(data: some DataProtocol) -> Digest {
        var hasher = Self()
        hasher.update(data: data)
        return hasher.finalize()
    }
}

/// How MD5, SHA-1 and SHA-256 are built alike: chaining words compressed block by block from a `BlockBuffer`, padded
/// at the end, saved as the words, the count and the pending bytes. Each hasher gives its words, compression and
/// digest; the rest is written once here.
protocol BlockHashFunction: Hashing.HashFunction {
    /// The chaining words, as a tuple the compression works on in registers.
    associatedtype Words
    var state: Words { get set }
    var buffer: BlockBuffer { get set }
    /// The words as an array, in order (saving, comparing), and back.
    var words: [UInt32] { get }
    mutating func setWords(_ words: [UInt32])
    /// How many words the state has.
    static var wordCount: Int { get }
    /// Whether the padding ends with the bit length big-endian (SHA) or little-endian (MD5).
    static var lengthIsBigEndian: Bool { get }
    /// Compresses `count` whole 64-byte blocks into the state.
    static func compress(_ state: inout Words, blocks: UnsafeRawPointer, count: Int)
    /// The digest of the state after the padding.
    func digest() -> Digest
}

extension BlockHashFunction {
    /// `byteCount`: the bytes hashed so far.
    var hashedByteCount: UInt64 { buffer.byteCount }

    /// `update(bufferPointer:)`: whole blocks in place, a partial block kept.
    mutating func absorb(_ bytes: UnsafeRawBufferPointer) {
        var words = state
        buffer.absorb(bytes) { Self.compress(&words, blocks: $0, count: $1) }
        state = words
    }

    /// `finalize()`: the digest of a padded copy.
    func finalized() -> Digest {
        var copy = self
        buffer.padding(bigEndianLength: Self.lengthIsBigEndian).withUnsafeBytes { copy.absorb($0) }
        precondition(copy.buffer.pendingCount == 0, "the padding must end on a block boundary")
        return copy.digest()
    }

    /// `init(from:)`: a saved state.
    /// - Throws: `DecodingError.dataCorrupted` when the words, the count or the pending bytes are inconsistent.
    static func restored(from decoder: any Decoder) throws -> Self {
        let (words, buffer) = try SavedBlockHash.restore(wordCount: wordCount, from: decoder)
        var hasher = Self()
        hasher.setWords(words)
        hasher.buffer = buffer
        return hasher
    }

    /// `encode(to:)`: the words, the byte count and the pending partial block (base64).
    func save(to encoder: any Encoder) throws {
        try SavedBlockHash(words: words, buffer: buffer).encode(to: encoder)
    }

    /// `==`: the same words, count and pending bytes.
    func hasSameState(as other: Self) -> Bool {
        words == other.words && buffer.isEqual(to: other.buffer)
    }
}

/// What MD5, SHA-1 and SHA-256 share: input consumed in 64-byte blocks, a partial block kept inline (no heap
/// allocation per update), the byte count, the padding, and the saved form of all that.
struct BlockBuffer: Sendable {
    /// How many bytes have been hashed so far, pending ones included.
    var byteCount: UInt64 = 0
    /// The bytes of an incomplete block, waiting for more input.
    private var pending: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)

    init() {}

    /// The number of bytes of the partial block.
    var pendingCount: Int { Int(byteCount & 63) }

    /// Feeds bytes: whole blocks are handed to `compress` in place from the caller's buffer; only a partial block is
    /// copied.
    /// - Parameters:
    ///   - input: the bytes.
    ///   - compress: hashes `count` whole blocks starting at the pointer.
    @inline(__always)
    mutating func absorb(_ input: UnsafeRawBufferPointer, _ compress: (UnsafeRawPointer, Int) -> Void) {
        guard var pointer = input.baseAddress, input.count > 0 else { return }
        var remaining = input.count
        let used = pendingCount
        byteCount &+= UInt64(remaining)
        if used > 0 {
            let take = min(64 - used, remaining)
            withUnsafeMutableBytes(of: &pending) { block in
                block.baseAddress!.advanced(by: used).copyMemory(from: pointer, byteCount: take)
            }
            pointer += take
            remaining -= take
            guard used + take == 64 else { return }
            withUnsafeBytes(of: pending) { compress($0.baseAddress!, 1) }
        }
        let wholeBlocks = remaining / 64
        if wholeBlocks > 0 {
            compress(pointer, wholeBlocks)
            pointer += wholeBlocks * 64
            remaining -= wholeBlocks * 64
        }
        if remaining > 0 {
            withUnsafeMutableBytes(of: &pending) { $0.baseAddress!.copyMemory(from: pointer, byteCount: remaining) }
        }
    }

    /// The final padding: 0x80, zeros up to 56 mod 64, then the bit length (little-endian for MD5, big-endian for
    /// the SHA family).
    func padding(bigEndianLength: Bool) -> [UInt8] {
        let bits = byteCount &<< 3
        let used = pendingCount
        let padLength = used < 56 ? 56 - used : 120 - used
        var tail = [UInt8](repeating: 0, count: padLength + 8)
        tail[0] = 0x80
        withUnsafeBytes(of: bigEndianLength ? bits.bigEndian : bits.littleEndian) { length in
            for i in 0..<8 { tail[padLength + i] = length[i] }
        }
        return tail
    }

    /// The pending bytes, for saving.
    var pendingBytes: Data {
        withUnsafeBytes(of: pending) { Data($0.prefix(pendingCount)) }
    }

    /// A buffer restored from its saved form.
    /// - Returns: `nil` when the pending bytes are not `byteCount % 64` bytes.
    init?(byteCount: UInt64, pendingBytes: Data) {
        guard pendingBytes.count == Int(byteCount & 63) else { return nil }
        self.byteCount = byteCount
        withUnsafeMutableBytes(of: &pending) { block in
            pendingBytes.withUnsafeBytes { source in
                if let base = source.baseAddress { block.baseAddress!.copyMemory(from: base, byteCount: source.count) }
            }
        }
    }

    /// Equal count and equal pending bytes (the bytes past the count do not matter).
    func isEqual(to other: BlockBuffer) -> Bool {
        byteCount == other.byteCount && pendingBytes == other.pendingBytes
    }
}

/// The saved form of a block hash: its chaining words, the byte count and the pending partial block (base64). It is
/// what a partial file's state keeps, so that a resume continues the hash without re-reading the file.
struct SavedBlockHash: Codable {
    var words: [UInt32]
    var byteCount: UInt64
    var pending: String

    init(words: [UInt32], buffer: BlockBuffer) {
        self.words = words
        byteCount = buffer.byteCount
        pending = buffer.pendingBytes.base64EncodedString()
    }

    private enum CodingKeys: String, CodingKey { case words, byteCount, pending }

    /// Restores the words and the buffer, checking that they fit the algorithm.
    /// - Parameters:
    ///   - wordCount: how many chaining words the algorithm has.
    ///   - decoder: where the state is read from.
    /// - Throws: `DecodingError.dataCorrupted` when the words or the pending bytes do not fit.
    static func restore(wordCount: Int, from decoder: any Decoder) throws -> ([UInt32], BlockBuffer) {
        let saved = try SavedBlockHash(from: decoder)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard saved.words.count == wordCount else {
            throw DecodingError.dataCorruptedError(
                forKey: .words, in: container,
                debugDescription: "the state needs \(wordCount) words, found \(saved.words.count)")
        }
        guard let data = Data(base64Encoded: saved.pending),
            let buffer = BlockBuffer(byteCount: saved.byteCount, pendingBytes: data)
        else {
            throw DecodingError.dataCorruptedError(
                forKey: .pending, in: container,
                debugDescription: "the pending block must hold byteCount % 64 = \(saved.byteCount & 63) bytes")
        }
        return (saved.words, buffer)
    }
}

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
        // ASCII written into the string's own storage: no table allocated per call, and no copy of bytes that are
        // contiguous already (an array, `Data`, a digest's bytes; issue #52).
        if let encoded = bytes.withContiguousStorageIfAvailable(encode(contiguous:)) { return encoded }
        return Array(bytes).withUnsafeBufferPointer(encode(contiguous:))
    }

    private static func encode(contiguous bytes: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            for (index, byte) in bytes.enumerated() {
                out[2 * index] = digit(byte >> 4)
                out[2 * index + 1] = digit(byte & 0x0f)
            }
            return bytes.count * 2
        }
    }

    /// The lowercase hex digit of a nibble.
    private static func digit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
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
