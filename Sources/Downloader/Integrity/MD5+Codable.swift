import Foundation

extension MD5: Codable {
    private enum CodingKeys: String, CodingKey {
        case words
        case byteCount
        case pending
    }

    /// Decodes a saved hasher state.
    /// - Throws: `DecodingError.dataCorrupted` if the words, the count or the pending bytes are inconsistent.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let words = try container.decode([UInt32].self, forKey: .words)
        let count = try container.decode(UInt64.self, forKey: .byteCount)
        let pendingBase64 = try container.decode(String.self, forKey: .pending)
        guard words.count == 4 else {
            throw DecodingError.dataCorruptedError(
                forKey: .words, in: container, debugDescription: "MD5 state needs 4 words, found \(words.count)")
        }
        guard let pendingBytes = Data(base64Encoded: pendingBase64), pendingBytes.count == Int(count & 63) else {
            throw DecodingError.dataCorruptedError(
                forKey: .pending, in: container,
                debugDescription: "MD5 pending block must hold byteCount % 64 = \(count & 63) bytes")
        }
        self.init()
        state = (words[0], words[1], words[2], words[3])
        byteCount = count
        withUnsafeMutableBytes(of: &pending) { block in
            pendingBytes.withUnsafeBytes { block.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
    }

    /// Encodes the hasher state: the four words, the byte count and the pending partial block (base64).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode([state.0, state.1, state.2, state.3], forKey: .words)
        try container.encode(byteCount, forKey: .byteCount)
        let pendingBytes = withUnsafeBytes(of: pending) { Data($0.prefix(pendingCount)) }
        try container.encode(pendingBytes.base64EncodedString(), forKey: .pending)
    }
}

extension MD5: Equatable {
    public static func == (lhs: MD5, rhs: MD5) -> Bool {
        guard lhs.byteCount == rhs.byteCount, lhs.state == rhs.state else { return false }
        let count = lhs.pendingCount
        return withUnsafeBytes(of: lhs.pending) { l in
            withUnsafeBytes(of: rhs.pending) { r in l.prefix(count).elementsEqual(r.prefix(count)) }
        }
    }
}
