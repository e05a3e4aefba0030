import Downloader
import Foundation

extension Arguments {
    /// Flags that are switches: `--lifo=yes` is a mistake, not a value.
    static func flagTakesNoValue(_ flag: String) -> Bool {
        [
            "--continue", "--lifo", "--no-md5", "--checksum-optional", "--quiet", "--list", "--wait", "--help",
            "--version",
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
