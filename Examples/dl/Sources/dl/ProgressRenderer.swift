import Dispatch
import Downloader
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Shows progress on stderr: live bars that fit the terminal on a terminal, occasional plain lines otherwise,
/// nothing but errors and warnings when quiet. Lines for stdout go through it too, so that bars are cleared before a
/// path is printed.
final class ProgressRenderer: @unchecked Sendable {
    enum Mode {
        case terminal, plain, quiet
    }

    private struct Line {
        var name: String
        var receipt: DownloadReceipt
        /// When it started: a row is drawn from `Screen.rowDelay` on, a plain progress line every 5 s after it.
        var started: Date
        var lastPlainReport: Date
    }

    private let mode: Mode
    private let width: () -> Int
    private let writeError: (String) -> Void
    private let writeOutput: (String) -> Bool
    /// Set once stdout turned out closed: paths are no longer printed, downloads go on.
    private var outputClosed = false
    private let now: () -> Date
    private let lock = NSLock()
    private var lines: [URL: Line] = [:]
    private var order: [URL] = []
    /// The names `-o`, `-O` and `out=` give files, while their downloads are in flight (the URL's name otherwise).
    private var chosenNames: [URL: String] = [:]
    private var drawnLines = 0
    private var lastDraw = Date.distantPast
    private let started: Date
    /// Done, failed, listed: the batch line's figures (and the final summary's).
    private var figures = Screen.BatchFigures()
    private var resize: DispatchSourceSignal?

    /// Creates a renderer.
    /// - Parameters:
    ///   - mode: terminal bars, plain lines, or quiet.
    ///   - width: the terminal's columns, asked at every redraw.
    ///   - writeError: where progress and messages go (stderr).
    ///   - writeOutput: where result paths go (stdout); `false` when it is closed.
    ///   - now: the clock.
    init(
        mode: Mode, width: @escaping () -> Int = Screen.terminalWidth,
        writeError: @escaping (String) -> Void = { Console.error($0) },
        writeOutput: @escaping (String) -> Bool = { Console.output($0) },
        now: @escaping () -> Date = Date.init
    ) {
        self.mode = mode
        self.width = width
        self.writeError = writeError
        self.writeOutput = writeOutput
        self.now = now
        started = now()
    }

    /// Redraws at once when the terminal is resized (SIGWINCH), so the bars fit the new width.
    func redrawOnResize() {
        guard mode == .terminal else { return }
        signal(SIGWINCH, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGWINCH, queue: .global())
        source.setEventHandler { [weak self] in self?.locked { $0.redraw(force: true) } }
        source.resume()
        resize = source
    }

    private func locked<T>(_ body: (ProgressRenderer) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(self)
    }

    /// Names a download's file as the command line or the list does (`-o NAME`, `out=NAME`) in its progress and
    /// messages, until `forgetName(of:)`.
    func setName(_ name: String, of url: URL) {
        locked { $0.chosenNames[url.withoutCredentials] = name }
    }

    /// The download ended: its name is no longer kept.
    func forgetName(of url: URL) {
        locked { _ = $0.chosenNames.removeValue(forKey: url.withoutCredentials) }
    }

    /// How a download is named on screen: its chosen name, else its URL's.
    private func displayName(_ url: URL) -> String {
        chosenNames[url].map(Screen.safe) ?? Screen.displayName(url)
    }

    /// Takes one manager event.
    func handle(_ event: DownloadEvent) {
        locked { $0.handleLocked(event) }
    }

    private func handleLocked(_ event: DownloadEvent) {
        switch event {
        case .stateChanged(let receipt):
            switch receipt.state {
            case .downloading:
                if lines[receipt.url] == nil { order.append(receipt.url) }
                let moment = now()
                lines[receipt.url] = Line(
                    name: displayName(receipt.url), receipt: receipt,
                    started: lines[receipt.url]?.started ?? moment, lastPlainReport: moment)
            case .completed, .failed, .suspended, .idle, .queued:
                if lines.removeValue(forKey: receipt.url) != nil { order.removeAll { $0 == receipt.url } }
                if receipt.state == .completed {
                    figures.done += 1
                    figures.bytes += receipt.totalBytesWritten
                    // What was checked, per file: a checksum compared, one computed only, or the length only.
                    message(
                        Screen.doneLine(
                            name: receipt.filename, bytes: receipt.totalBytesWritten,
                            verification: receipt.verification, width: mode == .terminal ? width() : nil))
                }
            }
            redraw(force: true)
        case .progress(let receipt):
            guard var line = lines[receipt.url] else { return }
            line.receipt = receipt
            if mode == .plain && now().timeIntervalSince(line.lastPlainReport) >= 5 {
                line.lastPlainReport = now()
                message("dl: \(line.name): \(Screen.summary(receipt))")
            }
            lines[receipt.url] = line
            redraw(force: false)
        case .retrying(let url, let attempt, let delay, let reason):
            // Visible, so that a frozen bar is explained: the fault and when the download goes on.
            let why = reason.reason.isEmpty ? reason.errorDescription ?? "a fault" : reason.reason
            message(
                "dl: \(displayName(url)): \(why); retry \(attempt) in \(String(format: "%.1f", delay)) s")
            redraw(force: true)
        case .warning(let url, let reason):
            message("dl: warning: \(displayName(url)): \(reason)", important: true)
            redraw(force: true)
        case .removed, .receiptsSaved:
            break
        case .receiptsSaveFailed(let error):
            // Downloads go on; only what a later run would find is at risk. Shown even when quiet.
            message("dl: warning: \(error.reason); downloads go on", important: true)
            redraw(force: true)
        }
    }

    /// Prints a line on stdout (a completed file's path, exact), keeping the bars intact. When stdout is closed (the
    /// reader of a pipe left), says so once on stderr; the downloads go on.
    func printResult(_ text: String) {
        locked { renderer in
            guard !renderer.outputClosed else { return }
            renderer.clearBars()
            if !renderer.writeOutput(text + "\n") {
                renderer.outputClosed = true
                renderer.message(
                    "dl: stdout is closed: downloads go on, their paths are no longer printed", important: true)
            }
            renderer.redraw(force: true)
        }
    }

    /// How many URLs the run has read so far, and whether that is all of them (the batch line's total).
    func listed(_ count: Int, ended: Bool) {
        locked { renderer in
            renderer.figures.listed = count
            renderer.figures.listEnded = ended
        }
    }

    /// Prints why a URL failed and counts it.
    func printFailure(_ text: String) {
        locked {
            $0.figures.failed += 1
            $0.message(text, important: true)
            $0.redraw(force: true)
        }
    }

    /// Prints a message on stderr (errors are printed even when quiet).
    func printError(_ text: String) {
        locked {
            $0.message(text, important: true)
            $0.redraw(force: true)
        }
    }

    /// Leaves the last progress on screen (Ctrl-C): the bars are drawn once more and kept; plain mode prints each
    /// download's last line.
    func freeze() {
        locked { renderer in
            if renderer.mode == .terminal {
                renderer.redraw(force: true)
                renderer.drawnLines = 0
            } else if renderer.mode == .plain {
                for url in renderer.order {
                    guard let line = renderer.lines[url] else { continue }
                    renderer.writeError(Screen.safe("dl: \(line.name): \(Screen.summary(line.receipt))") + "\n")
                }
            }
            renderer.lines.removeAll()
            renderer.order.removeAll()
        }
    }

    /// Removes the bars and prints the run's summary (not when quiet).
    /// - Parameter failures: how many URLs failed.
    func finish(failures: Int) {
        locked { renderer in
            renderer.clearBars()
            renderer.lines.removeAll()
            renderer.order.removeAll()
            let seconds = renderer.now().timeIntervalSince(renderer.started)
            renderer.message(
                Screen.finalSummary(
                    files: renderer.figures.done, bytes: renderer.figures.bytes, seconds: seconds, failures: failures))
        }
    }

    // MARK: - Drawing (lock held)

    /// A line on stderr between the bars and the rest of the output; control characters in it are escaped
    /// (`Screen.safe`): its names, URLs and reasons come from outside.
    private func message(_ text: String, important: Bool = false) {
        guard mode != .quiet || important else { return }
        clearBars()
        writeError(Screen.safe(text) + "\n")
    }

    private func redraw(force: Bool) {
        guard mode == .terminal else { return }
        let moment = now()
        guard force || moment.timeIntervalSince(lastDraw) >= 0.2 else { return }
        lastDraw = moment
        let columns = width()
        var rows = self.rows(at: moment, width: columns)
        if figures.listed > 1 || !figures.listEnded {
            figures.seconds = moment.timeIntervalSince(started)
            rows.append(Screen.batchLine(figures, width: columns))
        }
        var text = drawnLines > 0 ? "\u{1B}[\(drawnLines)A" : ""
        for row in rows { text += "\u{1B}[2K\r" + row + "\n" }
        for _ in rows.count..<max(rows.count, drawnLines) { text += "\u{1B}[2K\n" }
        let extra = max(0, drawnLines - rows.count)
        if extra > 0 { text += "\u{1B}[\(extra)A" }
        drawnLines = rows.count
        writeError(text)
    }

    /// The live rows: downloads running for `Screen.rowDelay` or longer, the earliest first, at most
    /// `Screen.maximumRows`, then how many more run.
    private func rows(at moment: Date, width columns: Int) -> [String] {
        let running = order.compactMap { lines[$0] }
            .filter { moment.timeIntervalSince($0.started) >= Screen.rowDelay }
        let shown = running.prefix(Screen.maximumRows)
        let names = Screen.uniqueNames(shown.map(\.name), limit: Screen.nameWidth(for: columns))
        var rows = zip(shown, names).map { line, name in Screen.line(name: name, receipt: line.receipt, width: columns)
        }
        if running.count > shown.count {
            rows.append(String("… and \(running.count - shown.count) more".prefix(max(1, columns - 1))))
        }
        return rows
    }

    private func clearBars() {
        guard mode == .terminal, drawnLines > 0 else { return }
        var text = "\u{1B}[\(drawnLines)A"
        for _ in 0..<drawnLines { text += "\u{1B}[2K\n" }
        text += "\u{1B}[\(drawnLines)A"
        drawnLines = 0
        writeError(text)
    }
}
