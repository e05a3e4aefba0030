import Foundation

/// What one window's request asked for, as the response judge needs it.
struct WindowRequest: Sendable {
    /// The first byte asked for.
    var start: Int64
    /// The last byte asked for, when the request had a closed range.
    var end: Int64?
    /// Whether the request carried a `Range` header.
    var ranged: Bool
    /// Where new bytes begin: `start` plus the bytes asked for again to compare (no strong validator).
    var resumeOffset: Int64
    /// The transfer's normal window size (it decides which files are small, see `ResponseJudge.isSmall`).
    var windowSize: Int64
}

/// What to do with a response.
enum ResponseVerdict: Sendable {
    /// A 206 that continues the file: keep the metadata, expect `bodyLength` bytes.
    case append(ResourceMetadata, bodyLength: Int64)
    /// A 206 from byte 0, which defines the version: keep the metadata, choose the hash, save the state when
    /// `checkpoint`.
    case begin(ResourceMetadata, bodyLength: Int64, checkpoint: Bool)
    /// A 200, the whole current version from byte 0: empty the file, keep the metadata, choose the hash, save the
    /// state when `checkpoint`.
    case replace(ResourceMetadata, bodyLength: Int64?, checkpoint: Bool)
    /// The request ends here: a changed resource, a 416, or a failure.
    case end(RequestEnd)
}

/// Judges a response against its request and what is known of the resource. It has no side effects: the sink carries
/// out the verdict, and every rule is tested without a socket.
enum ResponseJudge {
    /// A file up to this size that one window holds gets no saved state until it completes: thousands of small
    /// files then cost no state files at all, and a crash costs at most this much to fetch again.
    static let uncheckpointedSize: Int64 = 1 << 20

    /// Whether a file of this length gets no saved state (see `uncheckpointedSize`): the short first request of a new
    /// connection does not count as a window.
    static func isSmall(_ length: Int64, windowSize: Int64) -> Bool {
        length <= min(uncheckpointedSize, windowSize)
    }

    /// Judges a response head.
    /// - Parameters:
    ///   - head: the response's status and headers.
    ///   - request: what the request asked for.
    ///   - known: what is known of the resource so far.
    ///   - url: the download's URL, for errors.
    /// - Returns: the verdict, with the metadata the response leaves.
    static func judge(
        _ head: ResponseHead, request: WindowRequest, known: ResourceMetadata, url: URL
    ) -> ResponseVerdict {
        switch head.statusCode {
        case 206: judgePartial(head, request: request, known: known, url: url)
        case 200: judgeWhole(head, request: request, known: known)
        case 416: .end(.unsatisfiable(completeLength: head.contentRange.flatMap(ContentRange.init)?.completeLength))
        case 401: .end(.failed(unauthorized(head, url: url)))
        default: .end(.failed(.httpStatus(head.statusCode, url: url, retryAfter: head.retryAfter)))
        }
    }

    /// A `401`, saying what the server asks for: a login the session answers (Basic), or a scheme it does not.
    private static func unauthorized(_ head: ResponseHead, url: URL) -> DownloadError {
        let error = DownloadError.httpStatus(401, url: url)
        let schemes = head.authenticationSchemes
        if schemes.contains("basic") {
            return error.adding("it asks for a login (Basic): give one, or check the one given")
        }
        guard let first = schemes.first else { return error }
        return error.adding(
            "it asks for \(first.capitalized) authentication, which is not supported (Basic is): give an "
                + "Authorization header with a token instead")
    }

    private static func judgePartial(
        _ head: ResponseHead, request: WindowRequest, known: ResourceMetadata, url: URL
    ) -> ResponseVerdict {
        guard request.ranged, let header = head.contentRange, let contentRange = ContentRange(header),
            let range = contentRange.range
        else {
            return .end(.failed(.invalidResponse(url, reason: "206 without a usable Content-Range")))
        }
        guard range.lowerBound == request.start, request.end.map({ range.upperBound <= $0 }) ?? true else {
            return .end(
                .failed(
                    .invalidResponse(url, reason: "asked for bytes from \(request.start), got Content-Range \(header)"))
            )
        }
        guard !head.isContentEncoded else {
            // URLSession decodes any Content-Encoding and cannot hand over the bytes as stored, so a range of them
            // cannot be placed in the file: the resource is fetched whole and saved decoded.
            let encoding = head.contentEncoding ?? ""
            return .end(
                .wholeWithoutRanges(
                    reason: "the server sends it with Content-Encoding \(encoding), which URLSession decodes: it is "
                        + "fetched whole, without ranges, and saved decoded"))
        }
        let validators = head.validators(ignoringETag: known.ignoresETag)
        let bodyLength = Int64(range.count)
        var metadata = known
        if request.resumeOffset > 0 {
            switch known.compare(validators, completeLength: contentRange.completeLength) {
            case .same: break
            case .otherETag(let reason): return .end(.unreliableETag(reason: reason))
            case .changed(let reason): return .end(.restartFromZero(reason: reason))
            }
            metadata.totalLength = known.totalLength ?? contentRange.completeLength
            if known.validators.isEmpty { metadata.validators = validators }
            // Repr-Digest and Digest describe the whole file even on a part.
            if known.announced.isEmpty { metadata.announced = head.announcedChecksums(bodyIsWholeFile: false) }
            return .append(metadata, bodyLength: bodyLength)
        }
        // Byte 0: nothing to splice onto, so this response defines the version. A fresh download starts here without
        // a HEAD, so it also reads the name and the announced checksums (a body's digest only when the body is the
        // whole file). The version is saved at once (a crash mid-window then keeps its bytes), except for a small
        // file: it is verified and moved right after its last byte.
        if validators.differs(from: known.validators) { metadata.announced = [] }
        metadata.validators = validators
        metadata.totalLength = contentRange.completeLength
        metadata.suggestedFilename = head.dispositionFilename ?? known.suggestedFilename
        let announced = head.announcedChecksums(bodyIsWholeFile: contentRange.completeLength == bodyLength)
        if !announced.isEmpty { metadata.announced = announced }
        let small = isSmall(contentRange.completeLength ?? .max, windowSize: request.windowSize)
        return .begin(metadata, bodyLength: bodyLength, checkpoint: !small)
    }

    /// A whole body: the first request, a server that ignores Range, or an If-Range that failed because the resource
    /// changed. In every case the body is the whole current version, from byte 0.
    private static func judgeWhole(
        _ head: ResponseHead, request: WindowRequest, known: ResourceMetadata
    ) -> ResponseVerdict {
        let encoded = head.isContentEncoded
        let validators = head.validators(ignoringETag: known.ignoresETag)
        var metadata = known
        let sameVersion = !validators.differs(from: known.validators)
        if request.ranged && sameVersion && (request.resumeOffset > 0 || request.end != nil) {
            metadata.rangesSupported = false  // same version, Range ignored: stream from now on
        }
        metadata.validators = validators
        metadata.totalLength = encoded ? nil : head.contentLength
        metadata.decodedEncoding = encoded ? head.contentEncoding : nil
        metadata.suggestedFilename = head.dispositionFilename ?? known.suggestedFilename
        metadata.announced = head.announcedChecksums(bodyIsWholeFile: true)
        if encoded { metadata.rangesSupported = false }
        let small = metadata.totalLength.map { $0 <= uncheckpointedSize } ?? false
        return .replace(metadata, bodyLength: metadata.totalLength, checkpoint: !small)
    }
}
