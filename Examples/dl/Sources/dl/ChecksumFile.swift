import Downloader
import Foundation

/// A checksum list as `sha256sum`, `sha1sum` and `md5sum` write it (`HEX  name`, `HEX *name` for binary mode, a
/// leading `\` when the name has escapes), or as their `--tag` / BSD form writes it (`SHA256 (name) = HEX`).
/// Lines that are empty or start with `#` are skipped.
struct ChecksumFile {
    /// The checksum of each file name.
    let checksums: [String: Checksum]

    /// Parses a checksum list.
    /// - Parameter text: the file's content.
    /// - Throws: `UsageError` naming the first line that is none of the forms.
    init(parsing text: String) throws(UsageError) {
        var checksums: [String: Checksum] = [:]
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.hasSuffix("\r") ? rawLine.dropLast() : rawLine
            if line.trimmingCharacters(in: .whitespaces).isEmpty || line.hasPrefix("#") { continue }
            guard let (name, checksum) = Self.bsdLine(line) ?? Self.gnuLine(line) else {
                throw UsageError(message: "checksum file line \(index + 1) is not `HEX  name` or `ALG (name) = HEX`")
            }
            checksums[name] = checksum
        }
        self.checksums = checksums
    }

    /// `SHA256 (name) = hex`.
    private static func bsdLine(_ line: Substring) -> (String, Checksum)? {
        guard let open = line.firstIndex(of: "("), let close = line.range(of: ") = ", options: .backwards),
            open < close.lowerBound,
            let algorithm = Checksum.Algorithm(name: line[..<open].trimmingCharacters(in: .whitespaces)),
            let checksum = Checksum(algorithm: algorithm, hexString: String(line[close.upperBound...]))
        else { return nil }
        return (String(line[line.index(after: open)..<close.lowerBound]), checksum)
    }

    /// `hex  name` or `hex *name`, the algorithm told by the length of the hex; `\hex  name` when the name holds
    /// escaped backslashes or newlines.
    private static func gnuLine(_ line: Substring) -> (String, Checksum)? {
        var rest = line
        let escaped = rest.hasPrefix("\\")
        if escaped { rest = rest.dropFirst() }
        guard let space = rest.firstIndex(of: " ") else { return nil }
        let hex = String(rest[..<space])
        var name = rest[rest.index(after: space)...]
        guard name.first == " " || name.first == "*" else { return nil }
        name = name.dropFirst()
        guard !name.isEmpty, let algorithm = Checksum.Algorithm(hexLength: hex.count),
            let checksum = Checksum(algorithm: algorithm, hexString: hex)
        else { return nil }
        var text = String(name)
        if escaped {
            text = text.replacingOccurrences(of: "\\n", with: "\n").replacingOccurrences(of: "\\\\", with: "\\")
        }
        return (text, checksum)
    }

    /// The checksum listed for the file a URL names (its last path component, percent-decoded).
    func checksum(for url: URL) -> Checksum? {
        let name = url.lastPathComponent.removingPercentEncoding ?? url.lastPathComponent
        return checksums[name] ?? checksums["./" + name]
    }
}
