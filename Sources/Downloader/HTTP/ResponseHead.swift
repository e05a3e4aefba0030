/// The parts of a response's head that a download reads, as a plain value: the response judge works on it without
/// URLSession, so tests build it by hand.
struct ResponseHead: Sendable {
    /// The status code.
    var statusCode: Int
    /// `Content-Range` as sent.
    var contentRange: String?
    /// `ETag` and `Last-Modified` as sent.
    var validators = Validators()
    /// `Content-Encoding` as sent.
    var contentEncoding: String?
    /// `Content-Length`, when the server sent one.
    var contentLength: Int64?
    /// The raw `Content-Disposition` file name, if any (sanitise before use).
    var dispositionFilename: String?
    /// The delay asked for by `Retry-After`, in seconds.
    var retryAfter: Double?
    /// `Repr-Digest`, `Digest`, `Content-Digest` and `Content-MD5` as sent.
    var reprDigest: String?
    var digest: String?
    var contentDigest: String?
    var contentMD5: String?
    /// The authentication schemes a `401` offers (`WWW-Authenticate`), lower-cased.
    var authenticationSchemes: [String] = []

    /// The validators, without the ETag when the server's ETags proved unreliable for this resource.
    func validators(ignoringETag: Bool) -> Validators {
        validators.ignoringETag(ignoringETag)
    }

    /// Whether the body is encoded (gzip, …) rather than the bytes of the file.
    var isContentEncoded: Bool {
        let encoding = contentEncoding?.lowercased()
        return encoding != nil && encoding != "identity"
    }

    /// The whole file's checksums the response announces (`Repr-Digest`, `Digest`, and `Content-Digest` /
    /// `Content-MD5` when the body is the whole file).
    func announcedChecksums(bodyIsWholeFile: Bool) -> [Checksum] {
        DigestHeaders.announced(
            reprDigest: reprDigest, digest: digest, contentDigest: contentDigest, contentMD5: contentMD5,
            bodyIsWholeFile: bodyIsWholeFile)
    }
}
