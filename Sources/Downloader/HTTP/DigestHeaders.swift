/// Reads the MD5 a server announces for its content: `Content-MD5` (RFC 1864, base64) or `Digest: md5=…`
/// (RFC 3230, base64, in a comma-separated list of algorithms).
enum DigestHeaders {
    /// The announced MD5, if either header carries a well-formed one.
    /// - Parameters:
    ///   - contentMD5: the `Content-MD5` value.
    ///   - digest: the `Digest` value.
    static func md5(contentMD5: String?, digest: String?) -> MD5Digest? {
        if let contentMD5, let value = MD5Digest(base64: contentMD5) { return value }
        guard let digest else { return nil }
        for item in digest.split(separator: ",") {
            let pair = item.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, pair[0].trimmingCharacters(in: .whitespaces).lowercased() == "md5" else { continue }
            if let value = MD5Digest(base64: String(pair[1])) { return value }
        }
        return nil
    }
}
