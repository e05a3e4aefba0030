import Downloader
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The text of `dl`'s progress area, as pure functions of what is shown and how wide the terminal is.
enum Screen {
    /// The columns of the terminal on stderr (`COLUMNS`, else 80, when it cannot be asked).
    static func terminalWidth() -> Int {
        var size = winsize()
        if ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return ProcessInfo.processInfo.environment["COLUMNS"].flatMap { Int($0) } ?? 80
    }

    /// How many columns names get on a terminal `width` wide: a quarter of it, from 8 to 28.
    static func nameWidth(for width: Int) -> Int {
        min(28, max(8, (width - 1) / 4))
    }

    /// The narrowest bar drawn (brackets and the space after them aside).
    static let minimumBar = 10

    /// One progress line that fits `width` columns with one to spare (a full last column makes terminals wrap):
    /// the name, a bar, then percentage, bytes, speed and ETA. On a narrower terminal the bytes give way before the
    /// bar does — the total first, then the bytes so far — so from 50 columns up every line has a bar, the
    /// percentage, the speed and the ETA.
    /// - Parameters:
    ///   - name: the display name, already at most `nameWidth(for: width)` long.
    ///   - receipt: the download's progress.
    ///   - width: the terminal's columns.
    static func line(name: String, receipt: DownloadReceipt, width: Int) -> String {
        let usable = max(1, width - 1)
        let nameColumns = nameWidth(for: width)
        let statuses = [summary(receipt), summary(receipt, compact: true), summary(receipt, minimal: true)]
        let fitting = statuses.first { nameColumns + 1 + minimumBar + 3 + $0.count <= usable }
        let status = fitting ?? statuses[2]
        let room = usable - nameColumns - 1 - status.count
        var text = name.padding(toLength: nameColumns, withPad: " ", startingAt: 0) + " "
        if room >= minimumBar + 3 {
            let barWidth = min(30, room - 3)
            let filled = min(barWidth, Int(receipt.fractionCompleted * Double(barWidth)))
            text +=
                "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: barWidth - filled) + "] "
        }
        text += status
        return text.count > usable ? String(text.prefix(usable)) : text
    }

    /// The line that says a file is done — its name, its size and what was verified — in at most `width - 1`
    /// columns: a long digest is shown by its ends (`sha-256=4f3b2a1c…e4f3a`), then the name is shortened. Without a
    /// width (not a terminal) everything is shown in full.
    static func doneLine(name: String, bytes count: Int64, verification: Verification?, width: Int?) -> String {
        let full = "dl: \(name): done, \(bytes(count)), \(verification?.description ?? "verified")"
        guard let width, full.count > width - 1 else { return full }
        // Shorter and shorter ways to say what was checked, until the line fits with a name of 8 or more.
        var forms: [String]
        switch verification {
        case .checksum(let checksum):
            let algorithm = checksum.algorithm.fieldName
            forms = [
                "verified \(algorithm)=\(abbreviated(checksum))", "\(algorithm)=\(checksum.hexString.prefix(8))… ok",
            ]
        case .computed(let checksum):
            let algorithm = checksum.algorithm.fieldName
            forms = [
                "\(algorithm)=\(abbreviated(checksum)) (computed)", "\(algorithm)=\(checksum.hexString.prefix(8))…",
            ]
        case .lengthOnly: forms = ["length only"]
        case .unverified: forms = ["not verified"]
        case nil: forms = ["verified"]
        }
        let rests = forms.map { ": done, \(bytes(count)), \($0)" }
        let rest = rests.first { "dl: ".count + 8 + $0.count <= width - 1 } ?? rests[rests.count - 1]
        let line = "dl: " + shorten(name, to: max(8, width - 1 - "dl: ".count - rest.count)) + rest
        return line.count > width - 1 ? String(line.prefix(max(1, width - 1))) : line
    }

    /// A digest by its first 8 and last 5 hex digits.
    static func abbreviated(_ checksum: Checksum) -> String {
        let hex = checksum.hexString
        return String(hex.prefix(8)) + "…" + String(hex.suffix(5))
    }

    /// Names shortened to `limit` characters, keeping both ends (`very-long…-2.tar.gz`), and made distinct: two
    /// names that still read the same get a number.
    static func uniqueNames(_ names: [String], limit: Int) -> [String] {
        var shortened = names.map { shorten($0, to: limit) }
        var seen: [String: Int] = [:]
        for index in shortened.indices {
            let text = shortened[index]
            seen[text, default: 0] += 1
            guard let count = seen[text], count > 1 else { continue }
            let suffix = "~\(count)"
            shortened[index] = shorten(names[index], to: max(1, limit - suffix.count)) + suffix
        }
        return shortened
    }

    /// `name` in at most `limit` characters, with an ellipsis in the middle when it is longer.
    static func shorten(_ name: String, to limit: Int) -> String {
        guard name.count > limit else { return name }
        guard limit > 3 else { return String(name.prefix(limit)) }
        let tail = (limit - 1) / 2
        return String(name.prefix(limit - 1 - tail)) + "…" + String(name.suffix(tail))
    }

    /// Percentage, bytes, speed and ETA; `compact` leaves out the total (the percentage tells it), `minimal` the bytes
    /// too when the total is known.
    static func summary(_ receipt: DownloadReceipt, compact: Bool = false, minimal: Bool = false) -> String {
        var text: String
        if minimal, receipt.totalBytesExpectedToWrite != nil {
            text = String(format: "%3.0f%%", receipt.fractionCompleted * 100)
        } else if compact, receipt.totalBytesExpectedToWrite != nil {
            text = String(format: "%3.0f%% %@", receipt.fractionCompleted * 100, bytes(receipt.totalBytesWritten))
        } else if let total = receipt.totalBytesExpectedToWrite {
            text = String(
                format: "%3.0f%% %@ / %@", receipt.fractionCompleted * 100, bytes(receipt.totalBytesWritten),
                bytes(total))
        } else {
            text = bytes(receipt.totalBytesWritten)
        }
        if let speed = receipt.bytesPerSecond { text += "  \(bytes(Int64(speed)))/s" }
        if let eta = receipt.estimatedTimeRemaining, eta.isFinite {
            text += "  ETA " + duration(eta)
        }
        return text
    }

    /// `m:ss`, or `h:mm:ss` from an hour, or `>99h`.
    static func duration(_ seconds: TimeInterval) -> String {
        let whole = Int(seconds.rounded())
        if whole >= 100 * 3600 { return ">99h" }
        if whole >= 3600 { return String(format: "%d:%02d:%02d", whole / 3600, whole / 60 % 60, whole % 60) }
        return String(format: "%d:%02d", whole / 60, whole % 60)
    }

    /// The run's last line: files, bytes, time, average speed, failures.
    static func finalSummary(files: Int, bytes count: Int64, seconds: TimeInterval, failures: Int) -> String {
        var text = "dl: \(files) file\(files == 1 ? "" : "s"), \(bytes(count)) in \(String(format: "%.1f", seconds)) s"
        if seconds > 0 && count > 0 { text += " (\(bytes(Int64(Double(count) / seconds)))/s)" }
        if failures > 0 { text += ", \(failures) failed" }
        return text
    }

    /// `512 B`, `1.5 KiB`, `3.2 GiB`.
    static func bytes(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
    }

    /// The name shown for a URL: its last path component, else its host, with control characters escaped.
    static func displayName(_ url: URL) -> String {
        let last = url.lastPathComponent
        return safe(
            last.isEmpty || last == "/" ? (url.host ?? url.absoluteString) : (last.removingPercentEncoding ?? last))
    }

    /// Text from outside (a server's name or header, a URL, a path) as it may be shown on a terminal: control
    /// characters — C0 and C1 controls, DEL, and the bidirectional overrides and isolates that reorder what follows —
    /// are written as escapes (`\n`, `\x1B`, `\u{202E}`), so no server can move the cursor, recolour or rewrite the
    /// screen, or break a line a script reads. Paths printed on stdout are not passed through it: they stay exact.
    static func safe(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            guard isControl(scalar) else {
                result.unicodeScalars.append(scalar)
                continue
            }
            switch scalar {
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x100: result += String(format: "\\x%02X", scalar.value)
            default: result += String(format: "\\u{%04X}", scalar.value)
            }
        }
        return result
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        return value < 0x20 || (0x7f...0x9f).contains(value) || (0x202a...0x202e).contains(value)
            || (0x2066...0x2069).contains(value) || value == 0x200e || value == 0x200f || value == 0x061c
    }
}
