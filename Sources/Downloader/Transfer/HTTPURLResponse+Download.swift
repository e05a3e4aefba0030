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

    /// The MD5 announced by `Content-MD5` or `Digest`.
    var announcedMD5: MD5Digest? {
        DigestHeaders.md5(
            contentMD5: value(forHTTPHeaderField: "Content-MD5"), digest: value(forHTTPHeaderField: "Digest"))
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
