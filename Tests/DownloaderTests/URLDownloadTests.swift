import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// `URL.fileName` and `URL.fileExtension` (issue #52): read off the URL's text, they must say what
/// `lastPathComponent` and `pathExtension` say, whatever the URL.
@Suite("URL file names")
struct URLDownloadTests {
    static let prefixes = [
        "http://example.com", "https://user:secret@example.com:8443", "HTTP://127.0.0.1:8080", "http://[::1]:80",
        "file://", "ftp://h", "http://h?q=1", "http://h#f",
    ]
    static let pieces = [
        "a", "report", "b.bin", "archive.tar.gz", ".hidden", "x.", "..", ".", "a..b", "%20", "caf%C3%A9.txt", "p;v=1",
        "q?x=1", "f#frag", "", "UPPER.TXT", "d-1_2.ISO", "é", "a b", "~u", "(1).pdf", "+", "x.tar%2Egz",
    ]

    @Test("fileName and fileExtension agree with lastPathComponent and pathExtension over seeded URLs")
    func sameAsFoundation() {
        let seeds = UInt64(ProcessInfo.processInfo.environment["DOWNLOADER_URL_SEEDS"] ?? "") ?? 2000
        var checked = 0
        for seed in 1...seeds {
            var random = SeededGenerator(seed: seed)
            let segments = (0..<Int(random.next() % 4)).map { _ in Self.pieces.randomElement(using: &random)! }
            let path = segments.map { "/" + $0 }.joined() + (random.next() % 5 == 0 ? "/" : "")
            var urls: [URL] = []
            if let url = URL(string: Self.prefixes.randomElement(using: &random)! + path) { urls.append(url) }
            // Files as the package names them: any characters, encoded by Foundation.
            urls.append(URL(fileURLWithPath: "/tmp/dl" + (path.removingPercentEncoding ?? path)))
            for url in urls {
                checked += 1
                #expect(url.fileName == url.lastPathComponent, "seed \(seed): \(url.absoluteString)")
                #expect(url.fileExtension == url.pathExtension, "seed \(seed): \(url.absoluteString)")
                if url.isFileURL { #expect(url.filePath == url.path, "seed \(seed): \(url.absoluteString)") }
            }
        }
        #expect(checked > Int(seeds))
    }

    static let urlPieces = [
        "http", "https", "HTTP", "ftp", "://", ":/", "/", "//", "?", "#", "@", ":", "h", "example.com", "127.0.0.1",
        "[::1]", ":8080", "a", "B", "0", "%", "%2", "%20", "%zz", "%C3%A9", "%%41", " ", "\t", "\n", "é", "ü", "😀",
        "-._~", "!$&'()*+,;=", "\"", "<", ">", "\\", "^", "`", "{", "|", "}", "\u{7F}", "\u{00A0}", "\u{2028}",
        "user:pw@", "file.bin", "q=1&r=2",
    ]

    @Test("URL.download takes plain text as it is, and gives the same URL or error as the long way over seeded texts")
    func plainTextShortcut() {
        let seeds = UInt64(ProcessInfo.processInfo.environment["DOWNLOADER_URL_SEEDS"] ?? "") ?? 3000
        var plain = 0
        var accepted = 0
        for seed in 1...seeds {
            var random = SeededGenerator(seed: seed)
            var text = ""
            if random.next() % 2 == 0 {
                // Mostly well-formed: a scheme, a host, then pieces.
                text = ["http://", "https://", "HTTPS://", "ftp://"].randomElement(using: &random)!
                text += ["h", "example.com", "127.0.0.1:80", "[::1]", "", "u:p@h"].randomElement(using: &random)!
            }
            for _ in 0..<Int(random.next() % 8) { text += Self.urlPieces.randomElement(using: &random)! }
            if URL.isPlain(text) { plain += 1 }
            let short = Result { () throws(DownloadError) in try URL.download(text, takesPlainText: true) }
            let long = Result { () throws(DownloadError) in try URL.download(text, takesPlainText: false) }
            switch (short, long) {
            case (.success(let a), .success(let b)):
                accepted += 1
                #expect(a.absoluteString == b.absoluteString, "seed \(seed): \(text.debugDescription)")
            case (.failure(let a), .failure(let b)):
                #expect(a == b && a.reason == b.reason, "seed \(seed): \(text.debugDescription)")
            default:
                Issue.record("seed \(seed): \(text.debugDescription): \(short) against \(long)")
            }
        }
        // Both ways were exercised: texts taken as they are, texts encoded or refused.
        #expect(plain > Int(seeds) / 20 && plain < Int(seeds) / 2, "\(plain) plain of \(seeds)")
        #expect(accepted > Int(seeds) / 10, "\(accepted) accepted of \(seeds)")
    }

    @Test("Plain text is only text that needs no trimming, no encoding and has a host")
    func plainTextCases() throws {
        #expect(URL.isPlain("http://127.0.0.1:8080/f/1.bin"))
        #expect(URL.isPlain("https://h/a%20b?q=%C3%A9#x"))
        #expect(!URL.isPlain("http://h/a b"))
        #expect(!URL.isPlain(" http://h/a"))
        #expect(!URL.isPlain("http://h/100%"))
        #expect(!URL.isPlain("http://h/%4"))
        #expect(!URL.isPlain("http://h/é"))
        #expect(!URL.isPlain("http:///nohost"))
        #expect(!URL.isPlain("http://"))
        #expect(!URL.isPlain("example.com/file"))
        #expect(try URL.download("http://h/100%25").absoluteString == "http://h/100%25")
        #expect(throws: DownloadError.unsupportedScheme) { try URL.download("ftp://example.com/file") }
    }

    @Test("Plain names are read off the text; others are left to Foundation")
    func plainNames() {
        #expect(URL(string: "http://h/a/b.bin")!.fileName == "b.bin")
        #expect(URL(string: "http://h/a/b.bin")!.fileExtension == "bin")
        #expect(URL(fileURLWithPath: "/tmp/x/5f3a.part").fileName == "5f3a.part")
        #expect(URL(fileURLWithPath: "/tmp/x/a b (1).pdf").fileName == "a b (1).pdf")
        #expect(URL(string: "http://h/caf%C3%A9.txt")!.fileName == "café.txt")
        #expect(URL(string: "http://h/dir/")!.fileName == "dir")
        #expect(URL(string: "http://h")!.fileName == URL(string: "http://h")!.lastPathComponent)
        #expect(URL(string: "http://h/.bashrc")!.fileExtension == "")
        #expect(URL(fileURLWithPath: "/tmp/x/5f3a.part").filePath == "/tmp/x/5f3a.part")
        #expect(URL(fileURLWithPath: "/tmp/x/a b%.pdf").filePath == "/tmp/x/a b%.pdf")
        #expect(URL(fileURLWithPath: "/tmp/x/", isDirectory: true).filePath == URL(fileURLWithPath: "/tmp/x/").path)
    }
}
