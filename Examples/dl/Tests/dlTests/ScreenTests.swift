import Downloader
import Foundation
import HTTPTestServer
import Testing

@testable import dl

/// Golden tests of `dl`'s progress area: what a terminal 60, 80 and 120 columns wide shows.
@Suite("dl screen")
struct ScreenTests {
    static let longA = "ubuntu-24.04.1-desktop-amd64-part-1.iso"
    static let longB = "ubuntu-24.04.1-desktop-amd64-part-2.iso"

    static func receipt(_ name: String, written: Int64, total: Int64?, speed: Double?, eta: Double?) -> DownloadReceipt
    {
        var receipt = DownloadReceipt(
            url: URL(string: "http://example.com/files/\(name)")!, filename: name,
            fileURL: URL(fileURLWithPath: "/tmp/\(name)"), state: .downloading, totalBytesExpectedToWrite: total)
        receipt.totalBytesWritten = written
        receipt.bytesPerSecond = speed
        receipt.estimatedTimeRemaining = eta
        return receipt
    }

    /// The renderer's stderr, with a fixed clock and width.
    final class Capture: @unchecked Sendable {
        private let lock = NSLock()
        private var text = ""
        func append(_ more: String) {
            lock.lock()
            text += more
            lock.unlock()
        }
        var all: String {
            lock.lock()
            defer { lock.unlock() }
            return text
        }
        /// What the screen shows line by line, escape sequences removed.
        var visibleLines: [String] {
            let plain = all.replacingOccurrences(of: "\u{1B}\\[[0-9]*[A-Z]", with: "", options: .regularExpression)
                .replacingOccurrences(of: "\r", with: "")
            return plain.split(separator: "\n").map(String.init).filter { !$0.isEmpty }
        }
    }

    func render(width: Int, mode: ProgressRenderer.Mode = .terminal) -> (ProgressRenderer, Capture) {
        let capture = Capture()
        let clock = Locked(Date(timeIntervalSince1970: 1_000))
        let renderer = ProgressRenderer(
            mode: mode, width: { width }, writeError: { capture.append($0) }, writeOutput: { _ in true },
            now: { clock.withLock { $0 } })
        for name in [Self.longA, Self.longB, "small.txt"] {
            renderer.handle(.stateChanged(Self.receipt(name, written: 0, total: 700 << 20, speed: nil, eta: nil)))
        }
        clock.withLock { $0 = Date(timeIntervalSince1970: 1_002) }  // rows are drawn for downloads older than 1 s
        renderer.handle(
            .progress(Self.receipt(Self.longA, written: 350 << 20, total: 700 << 20, speed: 12_582_912, eta: 28)))
        renderer.handle(.stateChanged(Self.receipt("small.txt", written: 0, total: nil, speed: nil, eta: nil)))
        return (renderer, capture)
    }

    @Test("Every line fits the terminal, at 40, 60, 80 and 120 columns", arguments: [60, 80, 120, 40])
    func fits(width: Int) {
        let (_, capture) = render(width: width)
        #expect(!capture.visibleLines.isEmpty)
        for line in capture.visibleLines {
            #expect(line.count <= width - 1, "\(line.count) > \(width - 1): \(line)")
        }
    }

    @Test("Golden lines at 60, 80 and 120 columns: name, bar, percentage, speed and ETA on every line")
    func golden() {
        let receipt = Self.receipt(Self.longA, written: 350 << 20, total: 700 << 20, speed: 12_582_912, eta: 28)
        func line(_ width: Int) -> String {
            let names = Screen.uniqueNames([Self.longA, Self.longB], limit: Screen.nameWidth(for: width))
            return Screen.line(name: names[0], receipt: receipt, width: width)
        }
        // 60 columns: the bytes give way to the bar.
        #expect(line(60) == "ubuntu-…-1.iso [#######--------]  50%  12.0 MiB/s  ETA 0:28")
        // 80 columns: the total gives way.
        #expect(line(80) == "ubuntu-24…art-1.iso [##########----------]  50% 350.0 MiB  12.0 MiB/s  ETA 0:28")
        #expect(
            line(120) == "ubuntu-24.04.1…64-part-1.iso [###############---------------]  50% 350.0 MiB / 700.0 MiB"
                + "  12.0 MiB/s  ETA 0:28")
        for width in [60, 80, 120] {
            #expect(line(width).contains("[") && line(width).contains("ETA 0:28") && line(width).count <= width - 1)
        }
    }

    @Test("The done line fits 60, 80 and 120 columns; not on a terminal it is whole")
    func doneLines() {
        let sha = Checksum(algorithm: .sha256, hexString: String(repeating: "4f3b2a1c", count: 8))!
        let md5 = Checksum(md5: "63bebe984ec14dce3091d23d6da78ec4")!
        func done(_ verification: Verification, _ width: Int?) -> String {
            Screen.doneLine(name: Self.longA, bytes: 700 << 20, verification: verification, width: width)
        }
        #expect(done(.computed(md5), 60) == "dl: ubuntu-24.0…-part-1.iso: done, 700.0 MiB, md5=63bebe98…")
        #expect(
            done(.checksum(sha), 80)
                == "dl: ubuntu-24.04…4-part-1.iso: done, 700.0 MiB, verified sha-256=4f3b2a1c…b2a1c")
        #expect(
            done(.computed(md5), 120)
                == "dl: ubuntu-24.04.1-desktop-amd64-part-1.iso: done, 700.0 MiB, md5=63bebe98…78ec4 (computed)")
        #expect(done(.checksum(sha), nil) == "dl: \(Self.longA): done, 700.0 MiB, verified \(sha)", "whole in a log")
        for width in [60, 80, 120] {
            #expect(done(.checksum(sha), width).count <= width - 1 && done(.computed(md5), width).count <= width - 1)
        }
    }

    @Test("Names that shorten to the same text stay distinct")
    func distinctNames() {
        let names = ["aaaaaaaaaaaaaaaa-x-bbbbbbbbbbbb", "aaaaaaaaaaaaaaaa-y-bbbbbbbbbbbb", "short"]
        let shown = Screen.uniqueNames(names, limit: 10)
        #expect(Set(shown).count == 3, "\(shown)")
        #expect(shown.allSatisfy { $0.count <= 10 })
        #expect(shown[2] == "short")
    }

    @Test("Ctrl-C keeps the last progress on screen; the end of a run prints a summary")
    func freezeAndSummary() {
        let (renderer, capture) = render(width: 120)
        renderer.freeze()
        let before = capture.all
        #expect(!before.hasSuffix("\u{1B}[3A"), "the bars were not erased")
        #expect(capture.visibleLines.contains { $0.contains("350.0 MiB / 700.0 MiB") })

        let (finished, output) = render(width: 80)
        finished.handle(
            .stateChanged(
                {
                    var done = Self.receipt("small.txt", written: 5 << 20, total: 5 << 20, speed: nil, eta: nil)
                    done.state = .completed
                    return done
                }()))
        finished.finish(failures: 1)
        #expect(output.visibleLines.last == "dl: 1 file, 5.0 MiB in 2.0 s (2.5 MiB/s), 1 failed")
    }

    @Test("Plain mode (not a terminal) writes no escape sequences; a retry is a line of its own")
    func plain() {
        let (renderer, capture) = render(width: 80, mode: .plain)
        renderer.handle(
            .retrying(
                URL(string: "http://example.com/files/small.txt")!, attempt: 2, delay: 1.5, reason: .connectionFailed))
        #expect(!capture.all.contains("\u{1B}["))
        #expect(capture.visibleLines.contains("dl: small.txt: the connection failed; retry 2 in 1.5 s"))
    }

    @Test("Durations read as m:ss, then h:mm:ss")
    func durations() {
        #expect(Screen.duration(28) == "0:28")
        #expect(Screen.duration(3725) == "1:02:05")
        #expect(Screen.duration(1e9) == ">99h")
    }

    @Test(
        "Text from a server shows its control characters escaped: no newline, escape or bidi override reaches the screen"
    )
    func controlCharactersEscaped() {
        #expect(Screen.safe("plain name.txt") == "plain name.txt")
        #expect(Screen.safe("a\nb\u{1B}[31mRED") == "a\\nb\\x1B[31mRED")
        #expect(Screen.safe("x\u{7F}\u{85}\u{9B}") == "x\\x7F\\x85\\x9B")
        #expect(Screen.safe("evil\u{202E}txt.exe") == "evil\\u{202E}txt.exe")
        #expect(Screen.safe("r\rt\t") == "r\\rt\\t")
        let hostile = "\u{0}\u{7}\u{1B}]0;title\u{7}\u{2066}\u{200F}"
        #expect(!Screen.safe(hostile).unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
        #expect(Screen.safe("é ü 日本 😀") == "é ü 日本 😀", "printable text outside ASCII is kept")
    }
}
