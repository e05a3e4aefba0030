/// The validators of one version of a resource, captured when its first byte was written. A resume sends them in
/// `If-Range` so that a changed resource comes back whole (200) instead of being spliced (206).
struct Validators: Codable, Equatable, Sendable {
    /// The `ETag` as sent, quotes included (`"abc"` or `W/"abc"`).
    var etag: String?
    /// The `Last-Modified` date as sent.
    var lastModified: String?
    /// `true` when the date is weak: not well before the response's `Date` (RFC 9110 §8.8.2.2, `HTTPDate.isWeak`;
    /// Apache serves a file written this second so). A weak date still tells versions apart but is never sent in
    /// `If-Range`, where it can only fail. `nil` otherwise, and in states saved before this was known.
    var lastModifiedIsWeak: Bool?

    /// Whether the ETag is strong: only a strong ETag may be used in `If-Range` (RFC 9110 §13.1.5).
    var hasStrongETag: Bool {
        guard let etag else { return false }
        return etag.hasPrefix("\"") && etag.hasSuffix("\"") && etag.count >= 2
    }

    /// The `If-Range` value: the strong ETag, else a strong Last-Modified date, else `nil` (no safe resume check).
    var ifRange: String? {
        if hasStrongETag { return etag }
        return lastModifiedIsWeak == true ? nil : lastModified
    }

    /// Whether another response describes a different version. Unknown validators never count as a change.
    func differs(from other: Validators) -> Bool {
        if let etag, let otherETag = other.etag { return etag != otherETag }
        if let lastModified, let otherDate = other.lastModified { return lastModified != otherDate }
        return false
    }

    var isEmpty: Bool { etag == nil && lastModified == nil }

    /// These validators without the ETag when `ignoring` (a server whose ETags proved unreliable).
    func ignoringETag(_ ignoring: Bool) -> Validators {
        var validators = self
        if ignoring { validators.etag = nil }
        return validators
    }

    /// Whether another response proves the same version: the same strong ETag, or, where there is none, the same
    /// Last-Modified date (what `If-Range` would send). Nothing proves a version that has neither.
    func proves(_ other: Validators) -> Bool {
        guard let ifRange, !differs(from: other) else { return false }
        return ifRange == other.ifRange
    }
}
