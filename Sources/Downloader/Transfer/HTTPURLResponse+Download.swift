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

    /// The MD5 of the whole file announced by `Content-MD5` or `Digest`.
    var announcedMD5: MD5Digest? { announcedMD5(bodyIsWholeFile: true) }

    /// The MD5 of the whole file announced by `Digest`, or by `Content-MD5` when the body is the whole file
    /// (`Content-MD5` describes the body: on a partial 206 it is the digest of that part only).
    func announcedMD5(bodyIsWholeFile: Bool) -> MD5Digest? {
        DigestHeaders.md5(
            contentMD5: bodyIsWholeFile ? value(forHTTPHeaderField: "Content-MD5") : nil,
            digest: value(forHTTPHeaderField: "Digest"))
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
