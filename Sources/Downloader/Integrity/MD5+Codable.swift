import Foundation

extension MD5: BlockHashFunction {
    static let wordCount = 4
    static let lengthIsBigEndian = false
    var words: [UInt32] { [state.0, state.1, state.2, state.3] }
    mutating func setWords(_ w: [UInt32]) { state = (w[0], w[1], w[2], w[3]) }
    func digest() -> MD5Digest { MD5Digest(words: state) }

    /// Decodes a saved hasher state.
    /// - Throws: `DecodingError.dataCorrupted` if the words, the count or the pending bytes are inconsistent.
    public init(from decoder: any Decoder) throws { self = try Self.restored(from: decoder) }

    /// Encodes the hasher state: the four words, the byte count and the pending partial block (base64).
    public func encode(to encoder: any Encoder) throws { try save(to: encoder) }

    public static func == (lhs: Hashing.MD5, rhs: Hashing.MD5) -> Bool { lhs.hasSameState(as: rhs) }
}
