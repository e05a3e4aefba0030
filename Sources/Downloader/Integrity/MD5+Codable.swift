import Foundation

extension MD5: Codable {
    /// Decodes a saved hasher state.
    /// - Throws: `DecodingError.dataCorrupted` if the words, the count or the pending bytes are inconsistent.
    public init(from decoder: any Decoder) throws {
        let (words, buffer) = try SavedBlockHash.restore(wordCount: 4, from: decoder)
        self.init()
        state = (words[0], words[1], words[2], words[3])
        self.buffer = buffer
    }

    /// Encodes the hasher state: the four words, the byte count and the pending partial block (base64).
    public func encode(to encoder: any Encoder) throws {
        try SavedBlockHash(words: [state.0, state.1, state.2, state.3], buffer: buffer).encode(to: encoder)
    }
}

extension MD5: Equatable {
    public static func == (lhs: Hashing.MD5, rhs: Hashing.MD5) -> Bool {
        lhs.state == rhs.state && lhs.buffer.isEqual(to: rhs.buffer)
    }
}
