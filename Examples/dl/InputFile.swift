import Downloader
import Foundation

/// A list of URLs in aria2's `--input-file` format: one file per line — its URL, then other URLs of the same file
/// (mirrors), separated by tabs — each optionally followed by indented option lines (`out=NAME`, `dir=DIR`,
/// `checksum=ALG=HEX`, `header=Name: value`). Empty lines and lines starting with `#` are skipped.
struct InputFile {
    /// One URL and its own options.
    struct Entry {
        var text: String
        /// The other URLs of the same file, as given after tabs.
        var mirrors: [String] = []
        var line: Int
        /// `out=`: the file name (may hold sub-folders; no `..`, not absolute).
        var output: String?
        /// `dir=`: the folder of this URL's file.
        var directory: String?
        var checksum: Checksum?
        var headers: [String: String] = [:]
    }

    let entries: [Entry]

    /// Parses an input file.
    /// - Parameter text: the file's content.
    /// - Throws: `UsageError` naming the first line that cannot be read.
    init(parsing text: String) throws(UsageError) {
        var entries: [Entry] = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let line = rawLine.hasSuffix("\r") ? rawLine.dropLast() : rawLine
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            guard line.first == " " || line.first == "\t" else {
                let fields = trimmed.split(separator: "\t").map { $0.trimmingCharacters(in: .whitespaces) }
                    .filter { !$0.isEmpty }
                entries.append(Entry(text: fields[0], mirrors: Array(fields.dropFirst()), line: number))
                continue
            }
            guard !entries.isEmpty else {
                throw UsageError(message: "input file line \(number): an option line before any URL")
            }
            guard let equals = trimmed.firstIndex(of: "=") else {
                throw UsageError(message: "input file line \(number): \"\(trimmed)\" is not NAME=VALUE")
            }
            let name = String(trimmed[..<equals])
            let value = String(trimmed[trimmed.index(after: equals)...])
            guard !value.isEmpty else { throw UsageError(message: "input file line \(number): \(name)= needs a value") }
            switch name {
            case "out":
                let components = value.split(separator: "/")
                guard !value.hasPrefix("/"), !components.contains(".."), !components.isEmpty else {
                    throw UsageError(message: "input file line \(number): out= must be a name inside the folder")
                }
                entries[entries.count - 1].output = value
            case "dir":
                entries[entries.count - 1].directory = value
            case "checksum":
                do {
                    entries[entries.count - 1].checksum = try Checksum(parsing: value)
                } catch {
                    throw UsageError(message: "input file line \(number): checksum: \(error.reason)")
                }
            case "header":
                let (headerName, headerValue) = try Arguments.header(value, context: "input file line \(number)")
                entries[entries.count - 1].headers[headerName] = headerValue
            default:
                throw UsageError(
                    message: "input file line \(number): unknown option \(name)= (out, dir, checksum, header)")
            }
        }
        self.entries = entries
    }
}
