import Foundation

/// Makes a server- or user-supplied name safe to use as one file name inside the download directory.
enum FilenameSanitizer {
    /// The longest name most file systems accept, in bytes.
    static let maximumLength = 255

    /// A safe file name, or `nil` when nothing usable is left.
    ///
    /// Keeps only the last path component (`/` and `\` both count as separators), removes control characters,
    /// leading dots and surrounding white space (so `..`, `.` and hidden names cannot appear), and shortens the name
    /// to 255 UTF-8 bytes, keeping its extension.
    /// - Parameter name: for example `"../../etc/passwd"` → `"passwd"`.
    static func sanitize(_ name: String) -> String? {
        let lastComponent = name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        var cleaned = String(
            String.UnicodeScalarView(
                lastComponent.unicodeScalars.filter { scalar in
                    !(scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) || scalar == "\u{FEFF}"
                        || (0x202a...0x202e).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value))
                }))
        // Trim white space and leading dots until neither is left: ". ." must not become ".".
        var previous: String
        repeat {
            previous = cleaned
            cleaned = trimmingBlanks(cleaned)
            while cleaned.hasPrefix(".") { cleaned.removeFirst() }
        } while cleaned != previous
        guard !cleaned.isEmpty else { return nil }
        return truncated(cleaned)
    }

    /// `name.trimmingCharacters(in: .whitespaces)` without its cost (it goes through `NSString`, which showed when a
    /// batch names every request of a long list): the same scalars as CoreFoundation's whitespace set — the tab, the
    /// space, U+00A0, U+1680, U+2000…U+200B, U+202F, U+205F, U+3000 — trimmed scalar by scalar.
    static func trimmingBlanks(_ name: String) -> String {
        func isBlank(_ scalar: Unicode.Scalar) -> Bool {
            switch scalar.value {
            case 0x09, 0x20, 0xA0, 0x1680, 0x2000...0x200B, 0x202F, 0x205F, 0x3000: return true
            default: return false
            }
        }
        let scalars = name.unicodeScalars
        guard let first = scalars.firstIndex(where: { !isBlank($0) }) else { return "" }
        let last = scalars.lastIndex(where: { !isBlank($0) }) ?? first
        return String(String.UnicodeScalarView(scalars[first...last]))
    }

    /// Shortens a name to `maximumLength` UTF-8 bytes on a character boundary, keeping a short extension.
    private static func truncated(_ name: String) -> String {
        guard name.utf8.count > maximumLength else { return name }
        var stem = name
        var ext = ""
        if let dot = name.lastIndex(of: "."), name.distance(from: dot, to: name.endIndex) <= 16 {
            stem = String(name[..<dot])
            ext = String(name[dot...])
        }
        while stem.utf8.count + ext.utf8.count > maximumLength, !stem.isEmpty { stem.removeLast() }
        return stem + ext
    }
}
