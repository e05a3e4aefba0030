import Foundation

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
