import Downloader
import Foundation
import Testing

@testable import dl

/// Golden tests of what a run of many URLs shows on a terminal: one batch line, and rows only for downloads that
/// last (issue #34: "sixteen empty 0 B bars flickering and no figure for the batch").
@Suite("dl screen, batches")
struct ScreenBatchTests {
    @Test("The batch line: done/total, failed, bytes, files/s, ETA; shorter terminals drop the ETA, rate, bytes")
    func batchLine() {
        var figures = Screen.BatchFigures(
            done: 1234, failed: 2, listed: 20000, listEnded: true, bytes: 12_900_000, seconds: 1.52)
        #expect(
            Screen.batchLine(figures, width: 80) == "dl: 1234/20000 done, 2 failed, 12.3 MiB, 813 files/s, ETA 0:23")
        #expect(Screen.batchLine(figures, width: 60) == "dl: 1234/20000 done, 2 failed, 12.3 MiB, 813 files/s")
        #expect(Screen.batchLine(figures, width: 40) == "dl: 1234/20000 done, 2 failed, 12.3 MiB")
        #expect(Screen.batchLine(figures, width: 35) == "dl: 1234/20000 done, 2 failed")
        #expect(Screen.batchLine(figures, width: 20).count == 19)
        figures.listEnded = false  // the list is still being read: no total, no ETA
        #expect(Screen.batchLine(figures, width: 80) == "dl: 1234/20000+ done, 2 failed, 12.3 MiB, 813 files/s")
        figures = Screen.BatchFigures(done: 0, listed: 16, listEnded: true, seconds: 0.2)
        #expect(Screen.batchLine(figures, width: 80) == "dl: 0/16 done, 0 B", "no rate before a second")
    }

    @Test("Rows only for downloads running 1 s or more, at most four, the rest counted; the batch line under them")
    func rows() {
        let capture = ScreenTests.Capture()
        let clock = Locked(Date(timeIntervalSince1970: 1_000))
        let renderer = ProgressRenderer(
            mode: .terminal, width: { 80 }, writeError: { capture.append($0) }, writeOutput: { _ in true },
            now: { clock.withLock { $0 } })
        renderer.listed(20, ended: true)
        for index in 0..<6 {
            renderer.handle(
                .stateChanged(ScreenTests.receipt("f\(index)", written: 0, total: 1 << 20, speed: nil, eta: nil)))
        }
        #expect(Self.screen(capture) == ["dl: 0/20 done, 0 B"], "nothing lasted a second yet")
        clock.withLock { $0 = Date(timeIntervalSince1970: 1_001.5) }
        renderer.handle(.stateChanged(ScreenTests.receipt("late", written: 0, total: 1 << 20, speed: nil, eta: nil)))
        var done = ScreenTests.receipt("f5", written: 1 << 20, total: 1 << 20, speed: nil, eta: nil)
        done.state = .completed
        renderer.handle(.stateChanged(done))
        let screen = Self.screen(capture)
        #expect(screen.count == 6, "\(screen)")
        #expect(screen.prefix(4).map { $0.prefix(3) } == ["f0 ", "f1 ", "f2 ", "f3 "])
        #expect(screen[4] == "… and 1 more")  // f4; "late" has run for less than a second
        #expect(screen[5] == "dl: 1/20 done, 1.0 MiB, 1 files/s, ETA 0:29")
    }

    /// What the terminal shows now: the lines after the last completed message, escape sequences applied.
    static func screen(_ capture: ScreenTests.Capture) -> [String] {
        var lines: [String] = []
        var cursor = 0
        let text = capture.all
        var index = text.startIndex
        var current = ""
        func put() {
            while lines.count <= cursor { lines.append("") }
            lines[cursor] = current
        }
        while index < text.endIndex {
            if text[index...].hasPrefix("\u{1B}[") {
                let rest = text[text.index(index, offsetBy: 2)...]
                let digits = rest.prefix { $0.isNumber }
                let command = rest[rest.index(rest.startIndex, offsetBy: digits.count)]
                if command == "A" { cursor -= Int(digits) ?? 1 }
                if command == "K" { current = "" }
                index = rest.index(rest.startIndex, offsetBy: digits.count + 1)
                continue
            }
            let character = text[index]
            if character == "\n" {
                put()
                cursor += 1
                current = ""
            } else if character == "\r" {
                current = ""
            } else {
                current.append(character)
            }
            index = text.index(after: index)
        }
        return lines.prefix(cursor + 1).filter { !$0.isEmpty }.filter { !$0.contains(": done,") }
    }
}
