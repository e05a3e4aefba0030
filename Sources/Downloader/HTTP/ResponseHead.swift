import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

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

/// The headers a download reads, parsed once here for the probe and for every window.
extension HTTPURLResponse {
    /// The head as a plain value for `ResponseJudge`.
    ///
    /// Each look-up costs corelibs a lower-cased copy of every field name, so a field is read only for the statuses
    /// that use it: `Content-Range` for 206 and 416, `Retry-After` for the rest (issue #52).
    var head: ResponseHead {
        let success = statusCode == 200 || statusCode == 206
        return ResponseHead(
            statusCode: statusCode,
            contentRange: statusCode == 206 || statusCode == 416 ? value(forHTTPHeaderField: "Content-Range") : nil,
            validators: validators, contentEncoding: value(forHTTPHeaderField: "Content-Encoding"),
            contentLength: expectedContentLength >= 0 ? expectedContentLength : nil,
            dispositionFilename: dispositionFilename, retryAfter: success ? nil : retryAfter,
            reprDigest: value(forHTTPHeaderField: "Repr-Digest"), digest: value(forHTTPHeaderField: "Digest"),
            contentDigest: value(forHTTPHeaderField: "Content-Digest"),
            contentMD5: value(forHTTPHeaderField: "Content-MD5"),
            authenticationSchemes: statusCode == 401 ? HostCredentials.offeredSchemes(self) : [])
    }

    /// `ETag` and `Last-Modified` as sent, the date marked weak when it is less than two seconds before `Date`.
    var validators: Validators {
        var validators = Validators(
            etag: value(forHTTPHeaderField: "ETag"), lastModified: value(forHTTPHeaderField: "Last-Modified"))
        // Only a date that If-Range would send is judged (nginx's strong ETags never need the date parsed).
        if !validators.hasStrongETag, let modified = validators.lastModified,
            HTTPDate.isWeak(lastModified: modified, responseDate: value(forHTTPHeaderField: "Date"))
        {
            validators.lastModifiedIsWeak = true
        }
        return validators
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

/// A parsed `Content-Range` header (RFC 9110 §14.4): `bytes first-last/complete`, `bytes */complete` or
/// `bytes first-last/*`.
struct ContentRange: Equatable, Sendable {
    /// The bytes sent, or `nil` for the `*` form of a 416 answer.
    var range: ClosedRange<Int64>?
    /// The whole resource's length, or `nil` when the server wrote `*`.
    var completeLength: Int64?

    /// Parses a header value.
    ///
    /// Read as bytes: every 206 carries one, and the same parse over `Character`s cost about 15,000 instructions
    /// (issue #52).
    /// - Parameter value: for example `"bytes 100-199/1000"`.
    /// - Returns: `nil` for anything malformed (the caller treats the response as unusable).
    init?(_ value: String) {
        var value = value
        let parsed = value.withUTF8 { Self.parse($0) }
        guard let parsed else { return nil }
        (range, completeLength) = parsed
    }

    private static func parse(_ text: UnsafeBufferPointer<UInt8>) -> (ClosedRange<Int64>?, Int64?)? {
        let space = UInt8(ascii: " ")
        var start = text.startIndex
        while start < text.endIndex, text[start] == space { start += 1 }
        let unit = Array("bytes ".utf8)
        guard text.endIndex - start >= unit.count,
            zip(text[start..<start + unit.count], unit).allSatisfy({
                $0 | 0x20 == $1 | 0x20 && ($1 != space || $0 == space)
            })
        else { return nil }
        start += unit.count
        while start < text.endIndex, text[start] == space { start += 1 }
        guard let slash = text[start...].firstIndex(of: UInt8(ascii: "/")) else { return nil }
        var end = text.endIndex
        while end > slash + 1, text[end - 1] == space { end -= 1 }
        let rangePart = text[start..<slash]
        let lengthPart = text[(slash + 1)..<end]
        let star = UInt8(ascii: "*")
        let completeLength: Int64?
        if lengthPart.elementsEqual([star]) {
            completeLength = nil
        } else {
            guard let length = number(lengthPart) else { return nil }
            completeLength = length
        }
        if rangePart.elementsEqual([star]) {
            guard completeLength != nil else { return nil }
            return (nil, completeLength)
        }
        guard let dash = rangePart.firstIndex(of: UInt8(ascii: "-")),
            let first = number(rangePart[..<dash]), let last = number(rangePart[(dash + 1)...]), first <= last
        else { return nil }
        if let completeLength, last >= completeLength { return nil }
        return (first...last, completeLength)
    }

    /// One to 18 ASCII digits.
    private static func number(_ digits: Slice<UnsafeBufferPointer<UInt8>>) -> Int64? {
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var result: Int64 = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { return nil }
            result = result * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        return result
    }
}

/// Reads the digests a server announces for a file:
/// - `Repr-Digest` (RFC 9530): the digest of the whole representation, whatever part a response carries;
/// - `Digest` (RFC 3230): the digest of the whole instance;
/// - `Content-Digest` (RFC 9530) and `Content-MD5` (RFC 1864): the digest of this response's body, so the file's
///   only when the body is the whole file.
///
/// Unknown algorithms (sha-512, …) and malformed values are skipped; nothing here throws.
enum DigestHeaders {
    /// The whole file's announced checksums, most trustworthy first (`Repr-Digest`, `Digest`, then the body's).
    static func announced(
        reprDigest: String?, digest: String?, contentDigest: String?, contentMD5: String?, bodyIsWholeFile: Bool
    ) -> [Checksum] {
        var result = members(of: reprDigest) + members(of: digest)
        if bodyIsWholeFile {
            result += members(of: contentDigest)
            if let contentMD5, let bytes = Data(base64Encoded: contentMD5.trimmingCharacters(in: .whitespaces)),
                let checksum = Checksum(algorithm: .md5, digest: bytes)
            {
                result.append(checksum)
            }
        }
        var seen = Set<Checksum.Algorithm>()
        return result.filter { seen.insert($0.algorithm).inserted }  // the first per algorithm wins
    }

    /// The checksum to verify against among announced ones: the strongest the library computes.
    static func preferred(_ announced: [Checksum]) -> Checksum? {
        for algorithm in [Checksum.Algorithm.sha256, .sha1, .md5] {
            if let checksum = announced.first(where: { $0.algorithm == algorithm }) { return checksum }
        }
        return nil
    }

    /// The members of a digest field: `name=:base64:` (a structured-field byte sequence, RFC 9530) or `name=base64`
    /// (RFC 3230), separated by commas, parameters after `;` ignored.
    static func members(of field: String?) -> [Checksum] {
        guard let field, field.utf8.count < 16_384 else { return [] }
        return field.split(separator: ",").compactMap { member -> Checksum? in
            let item = member.split(separator: ";", maxSplits: 1).first ?? member
            let pair = item.split(separator: "=", maxSplits: 1)
            guard pair.count == 2,
                let algorithm = Checksum.Algorithm(name: pair[0].trimmingCharacters(in: .whitespaces))
            else { return nil }
            var value = pair[1].trimmingCharacters(in: .whitespaces)
            if value.hasPrefix(":") && value.hasSuffix(":") && value.count >= 2 {
                value = String(value.dropFirst().dropLast())
            }
            guard let bytes = Data(base64Encoded: value) else { return nil }
            return Checksum(algorithm: algorithm, digest: bytes)
        }
    }
}

/// Extracts the file name from a `Content-Disposition` header (RFC 6266): `filename*` (RFC 8187, UTF-8
/// percent-encoded) wins over `filename`. The name is returned raw: sanitise it before use.
enum ContentDisposition {
    /// The suggested file name, if the header has one.
    /// - Parameter value: the header value, e.g. `attachment; filename="report.pdf"`.
    static func filename(from value: String) -> String? {
        var plain: String?
        var extended: String?
        for parameter in parameters(of: value) {
            switch parameter.name.lowercased() {
            case "filename*": extended = decodeExtended(parameter.value)
            case "filename": plain = parameter.value
            default: continue
            }
        }
        let chosen = extended ?? plain
        return chosen?.isEmpty == false ? chosen : nil
    }

    /// Splits `type; a=b; c="d; e"` into its parameters, honouring quoted strings and backslash escapes.
    private static func parameters(of value: String) -> [(name: String, value: String)] {
        var result: [(String, String)] = []
        var characters = Array(value)[...]
        // Skip the disposition type.
        while let c = characters.first, c != ";" { characters = characters.dropFirst() }
        while !characters.isEmpty {
            characters = characters.dropFirst()  // ";"
            while characters.first == " " || characters.first == "\t" { characters = characters.dropFirst() }
            var name = ""
            while let c = characters.first, c != "=", c != ";" {
                name.append(c)
                characters = characters.dropFirst()
            }
            guard characters.first == "=" else { continue }
            characters = characters.dropFirst()
            while characters.first == " " { characters = characters.dropFirst() }
            var parameterValue = ""
            if characters.first == "\"" {
                characters = characters.dropFirst()
                while let c = characters.first, c != "\"" {
                    if c == "\\", characters.count > 1 {
                        characters = characters.dropFirst()
                    }
                    parameterValue.append(characters.first!)
                    characters = characters.dropFirst()
                }
                characters = characters.dropFirst()  // closing quote
                while let c = characters.first, c != ";" { characters = characters.dropFirst() }
            } else {
                while let c = characters.first, c != ";" {
                    parameterValue.append(c)
                    characters = characters.dropFirst()
                }
                parameterValue = parameterValue.trimmingCharacters(in: .whitespaces)
            }
            result.append((name.trimmingCharacters(in: .whitespaces), parameterValue))
        }
        return result
    }

    /// Decodes `UTF-8'lang'percent%20encoded` (RFC 8187). Other charsets are accepted only when the bytes are ASCII.
    private static func decodeExtended(_ value: String) -> String? {
        let parts = value.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        let charset = parts[0].lowercased()
        guard charset == "utf-8" || charset == "iso-8859-1" || charset == "us-ascii" else { return nil }
        return String(parts[2]).removingPercentEncoding
    }
}

/// Parses `Retry-After` (RFC 9110 §10.2.3): delay seconds or an HTTP date.
enum RetryAfter {
    /// The delay the server asks for, in seconds (0 for a date in the past), or `nil` when malformed.
    /// - Parameters:
    ///   - value: the header value.
    ///   - now: the current date, for the HTTP-date form.
    static func delay(from value: String, now: Date = Date()) -> TimeInterval? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if !text.isEmpty, text.count <= 10, text.allSatisfy({ $0.isASCII && $0.isNumber }) {
            return TimeInterval(text)
        }
        guard let date = HTTPDate.parse(text) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }
}

/// HTTP dates (RFC 9110 §5.6.7): IMF-fixdate, with the obsolete RFC 850 and asctime forms accepted.
enum HTTPDate {
    /// Whether a `Last-Modified` date is weak: RFC 9110 §8.8.2.2 asks it to be at least one second before the
    /// response's `Date`; two are asked here, because both are whole seconds and Apache compares the file's exact
    /// time (it refuses the date in `If-Range` unless the file is more than a second older than the request: seen
    /// with 15:27:56 against a `Date` of 15:27:57). Without a `Date`, or with a date that does not parse, it is taken
    /// as strong (as before this was judged).
    static func isWeak(lastModified: String, responseDate: String?) -> Bool {
        guard let responseDate else { return false }
        if responseDate == lastModified { return true }  // the same second, without parsing
        guard let modified = parse(lastModified), let date = parse(responseDate) else { return false }
        return date.timeIntervalSince(modified) < 2
    }

    private static let formats = [
        "EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy",
    ]

    static func parse(_ text: String) -> Date? {
        guard text.count < 64 else { return nil }
        for format in formats {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }
}
