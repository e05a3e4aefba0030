import Foundation

/// What a server's error page says, short enough for a message: an expired signed link's "Request has expired" is
/// the next step for the user, where the status alone ("403 Forbidden") is not.
enum ErrorBody {
    /// The most body bytes read from an error response.
    static let maximumBytes = 4096
    /// The longest summary, in characters.
    static let maximumLength = 200

    /// The first line of text in an error body: markup (HTML, XML such as S3's `<Error><Message>…`) becomes spaces,
    /// white space is collapsed, control characters are escaped, and the line is cut to `maximumLength` characters.
    /// - Returns: `nil` for an empty body or one that is not text.
    static func summary(of body: Data) -> String? {
        guard !body.isEmpty, !body.prefix(512).contains(0) else { return nil }
        var text = String(decoding: body.prefix(maximumBytes), as: UTF8.self)
        // Cloud storage says it in a message field: S3, GCS and Azure in XML (`<Code>`, `<Message>`), JSON APIs in
        // `"message"`.
        if let message = field("Message", in: text, pattern: "<Message>([^<]*)</Message>")
            ?? field("message", in: text, pattern: #""message"\s*:\s*"((?:[^"\\]|\\.)*)""#)
        {
            let code = field("Code", in: text, pattern: "<Code>([^<]*)</Code>")
            text = code.map { "\($0): \(message)" } ?? message
        }
        if text.contains("<") {
            // Tags, comments and declarations become line breaks, so that the first line is the first text.
            text = text.replacingOccurrences(of: "<[^>]*>?", with: "\n", options: .regularExpression)
            for (entity, character) in [("&lt;", "<"), ("&gt;", ">"), ("&quot;", "\""), ("&#39;", "'"), ("&amp;", "&")]
            {
                text = text.replacingOccurrences(of: entity, with: character)
            }
        }
        let lines = text.split(whereSeparator: \.isNewline)
        guard
            let line = lines.lazy.map({ $0.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ") })
                .first(where: { !$0.isEmpty })
        else { return nil }
        var escaped = ""
        for scalar in line.unicodeScalars {
            if scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format {
                escaped += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped.count > maximumLength ? String(escaped.prefix(maximumLength - 1)) + "…" : escaped
    }

    /// The first capture of `pattern` in `text`, when not empty.
    private static func field(_ name: String, in text: String, pattern: String) -> String? {
        guard text.contains(name), let expression = try? NSRegularExpression(pattern: pattern),
            let match = expression.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)),
            let range = Range(match.range(at: 1), in: text)
        else { return nil }
        let value = text[range].trimmingCharacters(in: .whitespacesAndNewlines)
        return value.isEmpty ? nil : value
    }
}
