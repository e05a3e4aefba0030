import Foundation

/// The line a run of many URLs shows under its live rows.
extension Screen {
    /// How many live rows a terminal shows at most; the others are counted on one more row.
    static let maximumRows = 4

    /// How long a download runs before it gets a row: most files of a long list finish sooner and never flicker.
    static let rowDelay: TimeInterval = 1

    /// What a batch has done so far.
    struct BatchFigures: Equatable {
        var done = 0
        var failed = 0
        /// URLs read so far.
        var listed = 0
        /// Whether every URL is read (the total is known).
        var listEnded = false
        var bytes: Int64 = 0
        var seconds: TimeInterval = 0
    }

    /// `dl: 1234/20000 done, 2 failed, 12.3 MiB, 812 files/s, ETA 0:24` in at most `width - 1` columns (`5000+` while
    /// the list is still being read, which also leaves the ETA out): the ETA gives way first, then the rate, then the
    /// bytes.
    static func batchLine(_ figures: BatchFigures, width: Int) -> String {
        let ended = figures.done + figures.failed
        var head = "dl: \(figures.done)/\(figures.listed)\(figures.listEnded ? "" : "+") done"
        if figures.failed > 0 { head += ", \(figures.failed) failed" }
        let rate = figures.seconds >= 1 ? Double(ended) / figures.seconds : nil
        var parts = [", \(bytes(figures.bytes))"]
        if let rate { parts.append(String(format: ", %.0f files/s", rate)) }
        if let rate, rate > 0, figures.listEnded {
            parts.append(", ETA " + duration(Double(figures.listed - ended) / rate))
        }
        // Drop from the end until it fits, keeping the counts.
        while !parts.isEmpty, head.count + parts.joined().count > width - 1 { parts.removeLast() }
        let text = head + parts.joined()
        return text.count > width - 1 ? String(text.prefix(max(1, width - 1))) : text
    }
}
