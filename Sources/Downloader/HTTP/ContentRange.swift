/// A parsed `Content-Range` header (RFC 9110 §14.4): `bytes first-last/complete`, `bytes */complete` or
/// `bytes first-last/*`.
struct ContentRange: Equatable, Sendable {
    /// The bytes sent, or `nil` for the `*` form of a 416 answer.
    var range: ClosedRange<Int64>?
    /// The whole resource's length, or `nil` when the server wrote `*`.
    var completeLength: Int64?

    /// Parses a header value.
    /// - Parameter value: for example `"bytes 100-199/1000"`.
    /// - Returns: `nil` for anything malformed (the caller treats the response as unusable).
    init?(_ value: String) {
        var text = Substring(value).drop { $0 == " " }
        guard text.lowercased().hasPrefix("bytes ") else { return nil }
        text = text.dropFirst(6).drop { $0 == " " }
        guard let slash = text.firstIndex(of: "/") else { return nil }
        let rangePart = text[..<slash]
        let lengthPart = text[text.index(after: slash)...].trimmingSuffix(while: { $0 == " " })
        if lengthPart == "*" {
            completeLength = nil
        } else {
            guard let length = Self.number(lengthPart) else { return nil }
            completeLength = length
        }
        if rangePart == "*" {
            guard completeLength != nil else { return nil }
            range = nil
        } else {
            let bounds = rangePart.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
            guard bounds.count == 2, let first = Self.number(bounds[0]), let last = Self.number(bounds[1]),
                first <= last
            else { return nil }
            if let completeLength, last >= completeLength { return nil }
            range = first...last
        }
    }

    private static func number(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.count <= 18, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int64(text)
    }
}

extension Substring {
    fileprivate func trimmingSuffix(while predicate: (Character) -> Bool) -> Substring {
        var end = endIndex
        while end > startIndex, predicate(self[index(before: end)]) { end = index(before: end) }
        return self[startIndex..<end]
    }
}
