import Downloader
import Foundation

extension Arguments {
    /// Short flags whose value may follow without a space: wget's `-Pdir`, `-Ofile`, aria2's `-x4`, `-j8`, `-ddir`.
    static let shortFlagsWithValues = ["-P", "-O", "-o", "-d", "-i", "-x", "-s", "-j", "-t", "-T", "-U", "-H"]

    /// Every long flag `dl` accepts, for suggestions.
    static let longFlags = [
        "--help", "--version", "--input-file", "--dir", "--directory-prefix", "--output", "--output-document",
        "--out", "--continue", "--max-active", "--max-concurrent-downloads", "--lifo", "--naming", "--header",
        "--user-agent", "--retries", "--tries", "--timeout", "--lowest-speed-limit", "--limit-rate",
        "--max-overall-limit", "--max-overall-download-limit", "--max-connection-per-server", "--split", "--wait",
        "--max-connections-per-host",
        "--md5", "--checksum", "--checksum-file", "--checksum-optional", "--no-md5", "--quiet", "--list", "--user",
        "--http-user", "--password", "--http-password", "--password-file", "--ask-password", "--netrc-file",
        "--no-netrc", "--on-complete",
        "--on-download-complete", "--load-cookies", "--save-cookies", "--file-allocation",
    ]

    /// The accepted flag closest to a mistyped one (`--limt-rate` → `--limit-rate`), if one is close enough: at most
    /// two edits, or three for a long flag.
    static func suggestion(for flag: String) -> String? {
        guard flag.hasPrefix("--") else { return nil }
        let limit = flag.count > 12 ? 3 : 2
        let scored = longFlags.map { ($0, editDistance(flag, $0)) }.filter { $0.1 <= limit }
        return scored.min { $0.1 < $1.1 }?.0
    }

    /// The Levenshtein distance between two strings (insertions, deletions and substitutions).
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        // previous[j]: the distance between the first i - 1 characters of a and the first j of b.
        var previous = Array(0...b.count)
        for (i, character) in a.enumerated() {
            var current = [i + 1]
            for j in b.indices {
                current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (character == b[j] ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }

    /// Flags that are switches: `--lifo=yes` is a mistake, not a value.
    static func flagTakesNoValue(_ flag: String) -> Bool {
        [
            "--continue", "--lifo", "--no-md5", "--checksum-optional", "--quiet", "--list", "--wait", "--help",
            "--version", "--no-netrc", "--ask-password",
        ].contains(flag)
    }

    /// A whole number of at least `minimum`.
    static func integer(_ text: String, for flag: String, minimum: Int) throws(UsageError) -> Int {
        guard let number = Int(text), number >= minimum else {
            throw UsageError(message: "\(flag) needs a whole number of at least \(minimum), not \"\(text)\"")
        }
        return number
    }

    /// A rate in bytes per second as wget and aria2 write it: `2000`, `500k`, `2M`, `1.5m`, `1G` (k = 1024).
    static func rate(_ text: String, for flag: String) throws(UsageError) -> Int {
        let units: [Character: Double] = ["k": 1024, "m": 1024 * 1024, "g": 1024 * 1024 * 1024]
        var number = text.trimmingCharacters(in: .whitespaces)
        var multiplier = 1.0
        if let last = number.last?.lowercased().first, let unit = units[last] {
            multiplier = unit
            number.removeLast()
        }
        guard let value = Double(number), value.isFinite, value * multiplier >= 1, value * multiplier < 1e15 else {
            throw UsageError(message: "\(flag) needs a rate such as 500k or 2M (bytes per second), not \"\(text)\"")
        }
        return Int(value * multiplier)
    }

    /// `Name: value`, trimmed.
    static func header(_ text: String, context: String) throws(UsageError) -> (String, String) {
        guard let colon = text.firstIndex(of: ":"), colon != text.startIndex else {
            throw UsageError(message: "\(context) needs 'Name: value', not \"\(text)\"")
        }
        let name = text[..<colon].trimmingCharacters(in: .whitespaces)
        let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, !name.contains(" ") else {
            throw UsageError(message: "\(context) has a bad name in \"\(text)\"")
        }
        return (name, value)
    }

    /// A file's text, or standard input's for `-`.
    static func readText(_ path: String, for flag: String) throws(UsageError) -> String {
        if path == "-" { return String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self) }
        do {
            return try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw UsageError(message: "\(flag): cannot read \(path)")
        }
    }

    /// The name wget gives a URL's file: its last path component, or `index.html`.
    static func fileName(of url: URL) -> String {
        let last = url.lastPathComponent.removingPercentEncoding ?? url.lastPathComponent
        let name = last.replacingOccurrences(of: "/", with: "_")
        return name.isEmpty || name == "/" || name == "." || name == ".." ? "index.html" : name
    }
}
