import Foundation

/// Reads the digests a server announces for a file:
/// - `Repr-Digest` (RFC 9530): the digest of the whole representation, whatever part a response carries;
/// - `Digest` (RFC 3230): the digest of the whole instance;
/// - `Content-Digest` (RFC 9530) and `Content-MD5` (RFC 1864): the digest of this response's body, so the file's
///   only when the body is the whole file.
///
/// Unknown algorithms (sha-512, …) and malformed values are skipped; nothing here throws.
enum DigestHeaders {
    /// The whole file's announced checksums, most trustworthy first (`Repr-Digest`, `Digest`, then the body's).
    static func announced(
        reprDigest: String?, digest: String?, contentDigest: String?, contentMD5: String?, bodyIsWholeFile: Bool
    ) -> [Checksum] {
        var result = members(of: reprDigest) + members(of: digest)
        if bodyIsWholeFile {
            result += members(of: contentDigest)
            if let contentMD5, let bytes = Data(base64Encoded: contentMD5.trimmingCharacters(in: .whitespaces)),
                let checksum = Checksum(algorithm: .md5, digest: bytes)
            {
                result.append(checksum)
            }
        }
        var seen = Set<Checksum.Algorithm>()
        return result.filter { seen.insert($0.algorithm).inserted }  // the first per algorithm wins
    }

    /// The checksum to verify against among announced ones: the strongest the library computes.
    static func preferred(_ announced: [Checksum]) -> Checksum? {
        for algorithm in [Checksum.Algorithm.sha256, .sha1, .md5] {
            if let checksum = announced.first(where: { $0.algorithm == algorithm }) { return checksum }
        }
        return nil
    }

    /// The members of a digest field: `name=:base64:` (a structured-field byte sequence, RFC 9530) or `name=base64`
    /// (RFC 3230), separated by commas, parameters after `;` ignored.
    static func members(of field: String?) -> [Checksum] {
        guard let field, field.utf8.count < 16_384 else { return [] }
        return field.split(separator: ",").compactMap { member -> Checksum? in
            let item = member.split(separator: ";", maxSplits: 1).first ?? member
            let pair = item.split(separator: "=", maxSplits: 1)
            guard pair.count == 2,
                let algorithm = Checksum.Algorithm(name: pair[0].trimmingCharacters(in: .whitespaces))
            else { return nil }
            var value = pair[1].trimmingCharacters(in: .whitespaces)
            if value.hasPrefix(":") && value.hasSuffix(":") && value.count >= 2 {
                value = String(value.dropFirst().dropLast())
            }
            guard let bytes = Data(base64Encoded: value) else { return nil }
            return Checksum(algorithm: algorithm, digest: bytes)
        }
    }
}
