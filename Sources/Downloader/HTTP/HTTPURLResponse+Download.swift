import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The headers a download reads, parsed once here for the probe and for every window.
extension HTTPURLResponse {
    /// `ETag` and `Last-Modified` as sent.
    var validators: Validators {
        Validators(etag: value(forHTTPHeaderField: "ETag"), lastModified: value(forHTTPHeaderField: "Last-Modified"))
    }

    /// The raw `Content-Disposition` file name, if any (sanitise before use).
    var dispositionFilename: String? {
        value(forHTTPHeaderField: "Content-Disposition").flatMap(ContentDisposition.filename)
    }

    /// The whole file's checksums the response announces (`Repr-Digest`, `Digest`, and `Content-Digest` /
    /// `Content-MD5` when the body is the whole file).
    func announcedChecksums(bodyIsWholeFile: Bool) -> [Checksum] {
        DigestHeaders.announced(
            reprDigest: value(forHTTPHeaderField: "Repr-Digest"), digest: value(forHTTPHeaderField: "Digest"),
            contentDigest: value(forHTTPHeaderField: "Content-Digest"),
            contentMD5: value(forHTTPHeaderField: "Content-MD5"), bodyIsWholeFile: bodyIsWholeFile)
    }

    /// The delay asked for by `Retry-After`, in seconds.
    var retryAfter: TimeInterval? {
        value(forHTTPHeaderField: "Retry-After").flatMap { RetryAfter.delay(from: $0) }
    }

    /// Whether the body is encoded (gzip, …) rather than the bytes of the file.
    var isContentEncoded: Bool {
        let encoding = value(forHTTPHeaderField: "Content-Encoding")?.lowercased()
        return encoding != nil && encoding != "identity"
    }
}
