import Foundation

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
