import Downloader
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Shows progress on stderr: live bars on a terminal, occasional plain lines otherwise, nothing when quiet. Lines
/// for stdout go through it too, so that bars are cleared before a path is printed.
final class ProgressRenderer: @unchecked Sendable {
    enum Mode {
        case terminal, plain, quiet
    }

    private struct Line {
        var name: String
        var receipt: DownloadReceipt
        var lastPlainReport: Date = .distantPast
    }

    private let mode: Mode
    private let lock = NSLock()
    private var lines: [URL: Line] = [:]
    private var order: [URL] = []
    private var drawnLines = 0
    private var lastDraw = Date.distantPast

    init(mode: Mode) {
        self.mode = mode
    }

    /// Takes one manager event.
    func handle(_ event: DownloadEvent) {
        lock.lock()
        defer { lock.unlock() }
        switch event {
        case .stateChanged(let receipt):
            switch receipt.state {
            case .downloading:
                if lines[receipt.url] == nil { order.append(receipt.url) }
                lines[receipt.url] = Line(name: Self.displayName(receipt.url), receipt: receipt)
                if mode == .plain { writeError("dl: \(Self.displayName(receipt.url)): downloading\n") }
            case .completed, .failed, .suspended, .idle, .queued:
                if lines.removeValue(forKey: receipt.url) != nil { order.removeAll { $0 == receipt.url } }
                if receipt.state == .completed && mode != .quiet {
                    // What was checked, per file: a checksum compared, one computed only, or the length only.
                    let checked = receipt.verification?.description ?? "verified"
                    clearBars()
                    writeError("dl: \(receipt.filename): done, \(Self.bytes(receipt.totalBytesWritten)), \(checked)\n")
                }
            }
            redraw(force: true)
        case .progress(let receipt):
            guard var line = lines[receipt.url] else { return }
            line.receipt = receipt
            if mode == .plain && Date().timeIntervalSince(line.lastPlainReport) >= 5 {
                line.lastPlainReport = Date()
                writeError("dl: \(line.name): \(Self.summary(receipt))\n")
            }
            lines[receipt.url] = line
            redraw(force: false)
        case .retrying(let url, let attempt, let delay, let reason):
            // Visible, so that a frozen bar is explained: the fault and when the download goes on.
            clearBars()
            writeError(
                "dl: \(Self.displayName(url)): \(reason.reason); retry \(attempt) in \(String(format: "%.1f", delay)) s\n"
            )
            redraw(force: true)
        case .removed, .receiptsSaved:
            break
        case .receiptsSaveFailed(let error):
            // Downloads go on; only what a later run would find is at risk. Shown even when quiet.
            clearBars()
            FileHandle.standardError.write(Data("dl: warning: \(error.reason); downloads go on\n".utf8))
            redraw(force: true)
        }
    }

    /// Prints a line on stdout (a completed file's path), keeping the bars intact.
    func printResult(_ text: String) {
        lock.lock()
        defer { lock.unlock() }
        clearBars()
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
        redraw(force: true)
    }

    /// Prints a message on stderr (errors are printed even when quiet).
    func printError(_ text: String) {
        lock.lock()
        defer { lock.unlock() }
        clearBars()
        writeError(text + "\n")
        redraw(force: true)
    }

    /// Removes the bars before the program exits.
    func finish() {
        lock.lock()
        defer { lock.unlock() }
        clearBars()
        lines.removeAll()
        order.removeAll()
    }

    // MARK: - Drawing (lock held)

    private func redraw(force: Bool) {
        guard mode == .terminal else { return }
        let now = Date()
        guard force || now.timeIntervalSince(lastDraw) >= 0.2 else { return }
        lastDraw = now
        var text = drawnLines > 0 ? "\u{1B}[\(drawnLines)A" : ""
        for url in order {
            guard let line = lines[url] else { continue }
            text += "\u{1B}[2K\r" + Self.bar(line) + "\n"
        }
        for _ in order.count..<max(order.count, drawnLines) { text += "\u{1B}[2K\n" }
        let extra = max(0, drawnLines - order.count)
        if extra > 0 { text += "\u{1B}[\(extra)A" }
        drawnLines = order.count
        writeError(text)
    }

    private func clearBars() {
        guard mode == .terminal, drawnLines > 0 else { return }
        var text = "\u{1B}[\(drawnLines)A"
        for _ in 0..<drawnLines { text += "\u{1B}[2K\n" }
        text += "\u{1B}[\(drawnLines)A"
        drawnLines = 0
        writeError(text)
    }

    private func writeError(_ text: String) {
        guard mode != .quiet || text.hasPrefix("dl: ") && !text.contains(": downloading") else { return }
        FileHandle.standardError.write(Data(text.utf8))
    }

    // MARK: - Formatting

    static func displayName(_ url: URL) -> String {
        let last = url.lastPathComponent
        let name =
            last.isEmpty || last == "/" ? (url.host ?? url.absoluteString) : (last.removingPercentEncoding ?? last)
        return name.count > 28 ? String(name.prefix(27)) + "…" : name
    }

    private static func bar(_ line: Line) -> String {
        let receipt = line.receipt
        let width = 20
        let fraction = receipt.fractionCompleted
        let filled = Int(fraction * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        let name = line.name.padding(toLength: 28, withPad: " ", startingAt: 0)
        return "\(name) [\(bar)] \(summary(receipt))"
    }

    static func summary(_ receipt: DownloadReceipt) -> String {
        var text: String
        if let total = receipt.totalBytesExpectedToWrite {
            text = String(
                format: "%3.0f%% %@ / %@", receipt.fractionCompleted * 100, bytes(receipt.totalBytesWritten),
                bytes(total))
        } else {
            text = bytes(receipt.totalBytesWritten)
        }
        if let speed = receipt.bytesPerSecond { text += "  \(bytes(Int64(speed)))/s" }
        if let eta = receipt.estimatedTimeRemaining, eta.isFinite {
            let seconds = Int(eta.rounded())
            text += String(format: "  ETA %d:%02d", seconds / 60, seconds % 60)
        }
        return text
    }

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
}
