import Foundation

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
