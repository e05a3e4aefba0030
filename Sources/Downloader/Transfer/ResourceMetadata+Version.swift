/// One rule for "is this still the version the partial file holds?", used by the HEAD before a resume
/// (`Transfer.restore`) and by every continuation's response (`ResponseJudge`), so that a resume and a window decide
/// alike (issue #33: the HEAD once judged by a rule of its own and restarted from byte 0 where a window would have
/// continued).
enum VersionComparison: Sendable, Equatable {
    /// Nothing shows another version.
    case same
    /// Only the ETag differs: the length is the same, and so is Last-Modified where both have one — backends that
    /// disagree on ETags for the same bytes. The ETag is ignored from then on, and each continuation compares the
    /// bytes before it (`Transfer.continuityCheckLength`).
    case otherETag(reason: String)
    /// Another version: its bytes cannot be spliced onto the partial file's.
    case changed(reason: String)
}

extension ResourceMetadata {
    /// Compares an answer about the resource with the version this metadata describes.
    /// - Parameters:
    ///   - validators: the answer's validators, read with `ignoringETag: ignoresETag`.
    ///   - completeLength: the whole resource's length the answer gives, if any.
    /// - Returns: whether the answer is the same version, the same bytes under another ETag, or another version.
    func compare(_ validators: Validators, completeLength: Int64?) -> VersionComparison {
        if validators.differs(from: self.validators) {
            let sameLength = totalLength != nil && completeLength == totalLength
            let sameDate =
                validators.lastModified == nil || self.validators.lastModified == nil
                || validators.lastModified == self.validators.lastModified
            if !ignoresETag, self.validators.etag != nil, validators.etag != nil, sameLength, sameDate {
                return .otherETag(
                    reason: "the server answers with another ETag (\(validators.etag ?? "")) for the same length; its "
                        + "ETags are ignored, and each continuation compares the bytes before it")
            }
            return .changed(reason: "the resource changed (validators differ)")
        }
        if let total = totalLength, let complete = completeLength, complete != total {
            return .changed(reason: "the resource's length changed from \(total) to \(complete)")
        }
        return .same
    }

    /// Stops trusting the server's ETags (after `VersionComparison.otherETag`).
    mutating func ignoreETags() {
        ignoresETag = true
        validators.etag = nil
    }
}
