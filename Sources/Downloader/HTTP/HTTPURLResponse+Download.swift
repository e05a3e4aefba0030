import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The headers a download reads, parsed once here for the probe and for every window.
extension HTTPURLResponse {
    /// The head as a plain value for `ResponseJudge`.
    var head: ResponseHead {
        ResponseHead(
            statusCode: statusCode, contentRange: value(forHTTPHeaderField: "Content-Range"), validators: validators,
            contentEncoding: value(forHTTPHeaderField: "Content-Encoding"),
            contentLength: expectedContentLength >= 0 ? expectedContentLength : nil,
            dispositionFilename: dispositionFilename, retryAfter: retryAfter,
            reprDigest: value(forHTTPHeaderField: "Repr-Digest"), digest: value(forHTTPHeaderField: "Digest"),
            contentDigest: value(forHTTPHeaderField: "Content-Digest"),
            contentMD5: value(forHTTPHeaderField: "Content-MD5"),
            authenticationSchemes: statusCode == 401 ? HostCredentials.offeredSchemes(self) : [])
    }

    /// `ETag` and `Last-Modified` as sent.
    var validators: Validators {
        Validators(etag: value(forHTTPHeaderField: "ETag"), lastModified: value(forHTTPHeaderField: "Last-Modified"))
    }

    /// The raw `Content-Disposition` file name, if any (sanitise before use).
    var dispositionFilename: String? {
        value(forHTTPHeaderField: "Content-Disposition").flatMap(ContentDisposition.filename)
    }

    /// The delay asked for by `Retry-After`, in seconds.
    var retryAfter: TimeInterval? {
        value(forHTTPHeaderField: "Retry-After").flatMap { RetryAfter.delay(from: $0) }
    }
}
