import Downloader
import Foundation

/// A list of URLs in aria2's `--input-file` format: one file per line — its URL, then other URLs of the same file
/// (mirrors), separated by tabs — each optionally followed by indented option lines (`out=NAME`, `dir=DIR`,
/// `checksum=ALG=HEX`, `header=Name: value`). Empty lines and lines starting with `#` are skipped.
///
/// Read a line at a time (`Parser`): an entry is complete when the next URL line or the end arrives, so a list of any
/// length costs the memory of one entry.
enum InputFile {
    /// One URL and its own options.
    struct Entry: Sendable {
        var text: String
        /// Where its URL line starts in the file (bytes).
        var offset: Int64 = 0
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

    /// Turns lines into entries, one line at a time.
    struct Parser {
        private var pending: Entry?
        private var number: Int

        /// A parser whose first line is line `linesBefore + 1` of the file.
        init(linesBefore: Int = 0) {
            number = linesBefore
        }

        /// Takes the next line (without its newline).
        /// - Parameters:
        ///   - rawLine: the line.
        ///   - offset: where it starts in the file.
        /// - Returns: the entry the line completes (the previous URL's, when the line starts a new one).
        /// - Throws: `UsageError` naming the line when it cannot be read.
        mutating func take(_ rawLine: Substring, at offset: Int64 = 0) throws(UsageError) -> Entry? {
            number += 1
            let line = rawLine.hasSuffix("\r") ? rawLine.dropLast() : rawLine
            let trimmed = String(line.trimmingBlanks())
            if trimmed.isEmpty || trimmed.hasPrefix("#") { return nil }
            guard line.first == " " || line.first == "\t" else {
                let fields = trimmed.split(separator: "\t").map { String($0.trimmingBlanks()) }.filter { !$0.isEmpty }
                defer {
                    pending = Entry(text: fields[0], offset: offset, mirrors: Array(fields.dropFirst()), line: number)
                }
                return pending
            }
            guard pending != nil else {
                throw UsageError(message: "input file line \(number): an option line before any URL")
            }
            try option(trimmed)
            return nil
        }

        /// Whether a URL line was read whose entry is not complete yet.
        var hasPending: Bool { pending != nil }

        /// The last entry, at the end of the list.
        mutating func finish() -> Entry? {
            defer { pending = nil }
            return pending
        }

        private mutating func option(_ trimmed: String) throws(UsageError) {
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
                pending?.output = value
            case "dir":
                pending?.directory = value
            case "checksum":
                do {
                    pending?.checksum = try Checksum(parsing: value)
                } catch {
                    throw UsageError(message: "input file line \(number): checksum: \(error.reason)")
                }
            case "header":
                let (headerName, headerValue) = try Arguments.header(value, context: "input file line \(number)")
                pending?.headers.setField(headerValue, named: headerName)
            default:
                throw UsageError(
                    message: "input file line \(number): unknown option \(name)= (out, dir, checksum, header)")
            }
        }
    }
}

extension StringProtocol {
    /// The text without leading and trailing whitespace (`Character.isWhitespace`: spaces and tabs, and the line and
    /// paragraph separators `trimmingCharacters(in: .whitespaces)` kept), without that call's cost (it goes through
    /// `NSString`, a tenth of the CPU of reading a list of a million URLs).
    fileprivate func trimmingBlanks() -> SubSequence {
        var text = self[...]
        while text.first?.isWhitespace == true { text = text.dropFirst() }
        while text.last?.isWhitespace == true { text = text.dropLast() }
        return text
    }
}
