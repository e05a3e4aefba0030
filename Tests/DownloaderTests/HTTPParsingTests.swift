import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

@Suite("Content-Range")
struct ContentRangeTests {
    @Test("Well-formed values parse")
    func wellFormed() {
        #expect(ContentRange("bytes 0-99/1000") == ContentRange(range: 0...99, completeLength: 1000))
        #expect(ContentRange("bytes 100-199/*")?.range == 100...199)
        #expect(ContentRange("bytes 100-199/*")?.completeLength == nil)
        #expect(ContentRange("bytes */5000") == ContentRange(range: nil, completeLength: 5000))
        #expect(ContentRange("  bytes  5-5/6 ") == ContentRange(range: 5...5, completeLength: 6))
    }

    @Test(
        "Malformed or impossible values are rejected",
        arguments: [
            "", "bytes", "bytes 0-99", "bytes 99-0/1000", "bytes 0-1000/1000", "bytes */*", "items 0-1/2",
            "bytes -1-5/10",
            "bytes 0-99/1e3", "bytes 0-99999999999999999999/1", "bytes a-b/c", "bytes 1-2-3/9", "bytes\t0-1/2",
            "bytez 0-1/2", "bytes 0-1/2\u{301}", "BYTES 0-1/2 x",
        ])
    func malformed(value: String) {
        #expect(ContentRange(value) == nil)
    }
}

extension ContentRange {
    init(range: ClosedRange<Int64>?, completeLength: Int64?) {
        self.init("bytes */1")!
        self.range = range
        self.completeLength = completeLength
    }

    /// The parser as it was before it read bytes (issue #52), over `Character`s: the fuzz test's reference.
    init?(reference value: String) {
        var text = Substring(value).drop { $0 == " " }
        guard text.lowercased().hasPrefix("bytes ") else { return nil }
        text = text.dropFirst(6).drop { $0 == " " }
        guard let slash = text.firstIndex(of: "/") else { return nil }
        let rangePart = text[..<slash]
        var lengthPart = text[text.index(after: slash)...]
        while lengthPart.last == " " { lengthPart = lengthPart.dropLast() }
        func number(_ text: Substring) -> Int64? {
            guard !text.isEmpty, text.count <= 18, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
            return Int64(text)
        }
        var completeLength: Int64?
        if lengthPart != "*" {
            guard let length = number(lengthPart) else { return nil }
            completeLength = length
        }
        if rangePart == "*" {
            guard completeLength != nil else { return nil }
            self.init(range: nil, completeLength: completeLength)
            return
        }
        let bounds = rangePart.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = number(bounds[0]), let last = number(bounds[1]), first <= last
        else { return nil }
        if let completeLength, last >= completeLength { return nil }
        self.init(range: first...last, completeLength: completeLength)
    }
}

@Suite("Content-Disposition")
struct ContentDispositionTests {
    @Test(
        "Names are extracted from quoted, token and RFC 8187 forms",
        arguments: [
            ("attachment; filename=\"report.pdf\"", "report.pdf"),
            ("attachment; filename=report.pdf", "report.pdf"),
            ("attachment;filename=\"a;b.txt\"", "a;b.txt"),
            ("attachment; filename=\"quote\\\"d.txt\"", "quote\"d.txt"),
            ("attachment; filename=\"fallback.txt\"; filename*=UTF-8''%E2%82%AC%20rates.txt", "€ rates.txt"),
            ("inline; filename*=utf-8'en'na%C3%AFve.txt", "naïve.txt"),
            ("ATTACHMENT; FILENAME=\"upper.bin\"", "upper.bin"),
        ])
    func extracts(header: String, expected: String) {
        #expect(ContentDisposition.filename(from: header) == expected)
    }

    @Test(
        "Headers without a usable name give nil",
        arguments: ["attachment", "inline; size=10", "attachment; filename=\"\"", ""])
    func none(header: String) {
        #expect(ContentDisposition.filename(from: header) == nil)
    }
}

@Suite("Digest headers")
struct DigestHeadersTests {
    static let emptyMD5 = Checksum(md5: "d41d8cd98f00b204e9800998ecf8427e")!
    static let emptySHA256 = Checksum(
        algorithm: .sha256, hexString: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")!
    static let emptySHA1 = Checksum(algorithm: .sha1, hexString: "da39a3ee5e6b4b0d3255bfef95601890afd80709")!

    func announced(
        repr: String? = nil, digest: String? = nil, content: String? = nil, md5: String? = nil, whole: Bool = true
    ) -> [Checksum] {
        DigestHeaders.announced(
            reprDigest: repr, digest: digest, contentDigest: content, contentMD5: md5, bodyIsWholeFile: whole)
    }

    @Test("Content-MD5, and Digest (RFC 3230) among other algorithms and spellings")
    func contentMD5AndDigest() {
        #expect(announced(md5: "1B2M2Y8AsgTpgAmY7PhCfg==") == [Self.emptyMD5])
        #expect(announced(digest: "UNIXsum=30637, MD5=1B2M2Y8AsgTpgAmY7PhCfg==") == [Self.emptyMD5])
        #expect(announced(digest: "md5=1B2M2Y8AsgTpgAmY7PhCfg==", md5: "garbage") == [Self.emptyMD5])
        #expect(
            announced(digest: "SHA-256=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=, SHA=2jmj7l5rSw0yVb/vlWAYkK/YBwk=")
                == [Self.emptySHA256, Self.emptySHA1], "RFC 3230 calls SHA-1 'SHA'")
        #expect(announced(digest: "sha=1B2M2Y8AsgTpgAmY7PhCfg==").isEmpty)
        #expect(announced().isEmpty)
    }

    @Test("Repr-Digest and Content-Digest (RFC 9530): byte sequences, parameters, several algorithms")
    func rfc9530() {
        let repr =
            "sha-512=:z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg==:, sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"
        #expect(announced(repr: repr) == [Self.emptySHA256], "sha-512 is not computed here: skipped")
        #expect(announced(repr: "sha-1=:2jmj7l5rSw0yVb/vlWAYkK/YBwk=:;q=1") == [Self.emptySHA1])
        // A body's digest describes the file only when the body is the whole file.
        let content = "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"
        #expect(announced(content: content, whole: true) == [Self.emptySHA256])
        #expect(announced(content: content, md5: "1B2M2Y8AsgTpgAmY7PhCfg==", whole: false).isEmpty)
        // Repr-Digest wins over a disagreeing Digest of the same algorithm; the strongest is preferred.
        let all = announced(
            repr: "md5=:1B2M2Y8AsgTpgAmY7PhCfg==:",
            digest: "MD5=AAAAAAAAAAAAAAAAAAAAAA==, SHA=2jmj7l5rSw0yVb/vlWAYkK/YBwk=")
        #expect(all == [Self.emptyMD5, Self.emptySHA1] && DigestHeaders.preferred(all) == Self.emptySHA1)
        #expect(announced(repr: "sha-256=:tooshort:, sha-256=notbase64!!, =:x:, sha-256").isEmpty)
    }
}

@Suite("Retry-After")
struct RetryAfterTests {
    @Test("Seconds and HTTP dates give a delay; garbage gives nil")
    func parse() throws {
        #expect(RetryAfter.delay(from: "120") == 120)
        #expect(RetryAfter.delay(from: " 0 ") == 0)
        let now = try #require(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"))
        #expect(RetryAfter.delay(from: "Sun, 06 Nov 1994 08:50:07 GMT", now: now) == 30)
        #expect(RetryAfter.delay(from: "Sunday, 06-Nov-94 08:50:37 GMT", now: now) == 60)
        #expect(RetryAfter.delay(from: "Sun Nov  6 08:49:47 1994", now: now) == 10)
        #expect(RetryAfter.delay(from: "Sun, 06 Nov 1994 08:00:00 GMT", now: now) == 0)
        #expect(RetryAfter.delay(from: "-5") == nil)
        #expect(RetryAfter.delay(from: "soon") == nil)
        #expect(RetryAfter.delay(from: "99999999999") == nil)
    }
}

@Suite("Validators")
struct ValidatorsTests {
    @Test("If-Range uses a strong ETag, else Last-Modified, never a weak ETag")
    func ifRange() {
        #expect(Validators(etag: "\"abc\"", lastModified: "d").ifRange == "\"abc\"")
        #expect(Validators(etag: "W/\"abc\"", lastModified: "d").ifRange == "d")
        #expect(Validators(etag: "W/\"abc\"", lastModified: nil).ifRange == nil)
        #expect(Validators().ifRange == nil)
        var weak = Validators(etag: "W/\"abc\"", lastModified: "d")
        weak.lastModifiedIsWeak = true
        #expect(weak.ifRange == nil, "a weak date is never sent")
        weak.etag = "\"abc\""
        #expect(weak.ifRange == "\"abc\"", "a strong ETag still is")
    }

    @Test("A Last-Modified is weak unless two seconds before the response's Date (RFC 9110 §8.8.2.2, Apache's rule)")
    func weakDates() {
        let date = "Sat, 28 Nov 2026 15:17:05 GMT"
        #expect(HTTPDate.isWeak(lastModified: date, responseDate: date))
        #expect(HTTPDate.isWeak(lastModified: "Sat, 28 Nov 2026 15:17:06 GMT", responseDate: date), "after Date")
        #expect(HTTPDate.isWeak(lastModified: "Sat, 28 Nov 2026 15:17:04 GMT", responseDate: date), "Apache's rule")
        #expect(!HTTPDate.isWeak(lastModified: "Sat, 28 Nov 2026 15:17:03 GMT", responseDate: date))
        #expect(!HTTPDate.isWeak(lastModified: date, responseDate: nil), "no Date: taken as strong, as before")
        #expect(!HTTPDate.isWeak(lastModified: "yesterday", responseDate: date), "unparsable: as before")
    }

    @Test("A change is an ETag or date that differs; unknown validators never count as a change")
    func differs() {
        #expect(
            Validators(etag: "\"a\"", lastModified: nil).differs(from: Validators(etag: "\"b\"", lastModified: nil)))
        #expect(
            !Validators(etag: "\"a\"", lastModified: "x").differs(from: Validators(etag: "\"a\"", lastModified: "y")))
        #expect(Validators(etag: nil, lastModified: "x").differs(from: Validators(etag: nil, lastModified: "y")))
        #expect(!Validators().differs(from: Validators(etag: "\"b\"", lastModified: nil)))
    }
}

@Suite("File names")
struct FilenameSanitizerTests {
    @Test(
        "Hostile names become one safe component",
        arguments: [
            ("../../etc/passwd", "passwd"), ("/abs/path.txt", "path.txt"), ("..", nil), (".", nil), ("", nil),
            ("a\u{0}b\u{1f}c\u{7f}d\u{85}.txt", "abcd.txt"), ("..\\..\\boot.ini", "boot.ini"),
            ("  .hidden  ", "hidden"),
            ("evil\u{202e}txt.exe", "eviltxt.exe"), ("dir/", "dir"),
            ("normal name (1).tar.gz", "normal name (1).tar.gz"),
            (". .", nil), (" . . .x", "x"),  // found by the fuzzer: trimming once left "."

        ] as [(String, String?)])
    func sanitize(name: String, expected: String?) {
        let result = FilenameSanitizer.sanitize(name)
        #expect(result == expected)
        if let result {
            #expect(!result.contains("/") && !result.contains("\\") && result != ".." && !result.hasPrefix("."))
        }
    }

    @Test("Long names are cut to 255 bytes on a character boundary, keeping the extension")
    func longNames() throws {
        let long = String(repeating: "é", count: 300) + ".tar.gz"
        let result = try #require(FilenameSanitizer.sanitize(long))
        #expect(result.utf8.count <= 255)
        #expect(result.hasSuffix(".gz"))
        #expect(result.unicodeScalars.allSatisfy { $0 == "é" || ".targz".unicodeScalars.contains($0) })
    }

    @Test("Default names are md5(url) plus a sane extension")
    func defaultNames() throws {
        let url = try #require(URL(string: "https://example.com/files/archive.zip?x=1"))
        let key = MD5.hash(data: Array(url.absoluteString.utf8)).hexString
        #expect(DownloadDirectory.defaultFilename(for: url) == key + ".zip")
        let noExtension = try #require(URL(string: "https://example.com/files/archive"))
        #expect(!DownloadDirectory.defaultFilename(for: noExtension).contains("."))
        let weird = try #require(URL(string: "https://example.com/a.ex%2Fe"))
        #expect(!DownloadDirectory.defaultFilename(for: weird).contains("/"))
    }

    @Test("An extension is kept when it is 1 to 16 ASCII letters and digits (the Unicode rule), over seeded ones")
    func extensionsKept() throws {
        let pieces = ["a", "Z", "7", "é", "ß", "Ω", "ｚ", "٣", "_", "-", "+", "~", "%41", "bin", "TAR", "0123456789"]
        for seed in UInt64(1)...300 {
            var random = SeededGenerator(seed: seed)
            let ext = (0..<Int(1 + random.next() % 6)).map { _ in pieces.randomElement(using: &random)! }.joined()
            let url = try #require(URL(string: "http://127.0.0.1:1/name." + ext), "seed \(seed): \(ext)")
            let read = url.fileExtension
            let expected =
                !read.isEmpty && read.utf8.count <= 16
                && read.unicodeScalars.allSatisfy {
                    $0.isASCII && $0.properties.isAlphabetic || ("0"..."9").contains($0)
                }
            let name = DownloadDirectory.defaultFilename(for: url, key: "k")
            #expect(name == (expected ? "k." + read : "k"), "seed \(seed): \(ext) → \(name)")
        }
    }
}

@Suite("Download URLs")
struct DownloadURLTests {
    @Test("Spaces and non-ASCII are percent-encoded; existing escapes are kept")
    func encodes() throws {
        #expect(
            try URL.download("https://example.com/a file/ü.zip").absoluteString
                == "https://example.com/a%20file/%C3%BC.zip")
        #expect(try URL.download("http://h:8080/x%20y?q=a b#f").absoluteString == "http://h:8080/x%20y?q=a%20b#f")
        #expect(try URL.download("http://h/100%").absoluteString == "http://h/100%25")
        #expect(try URL.download("  http://h/ok  ").absoluteString == "http://h/ok")
    }

    @Test("Bad input gets a clear DownloadError")
    func rejects() {
        #expect(throws: DownloadError.invalidURL) { try URL.download("example.com/file") }
        #expect(throws: DownloadError.invalidURL) { try URL.download("http://bü.example/x") }
        #expect(throws: DownloadError.invalidURL) { try URL.download("http:///nohost") }
        #expect(throws: DownloadError.unsupportedScheme) { try URL.download("ftp://example.com/file") }
    }
}

@Suite("Model")
struct ModelTests {
    @Test("Errors compare by kind, describe URL and reason, and survive a JSON round trip")
    func errors() throws {
        let url = try #require(URL(string: "http://h/f"))
        let error = DownloadError.httpStatus(503, url: url, retryAfter: 2)
        #expect(error == .httpStatus)
        #expect(error != .checksumMismatch)
        #expect(
            error.description == "DownloadError.httpStatus (http://h/f): the server answered 503 Service Unavailable")
        let decoded = try JSONDecoder().decode(DownloadError.self, from: JSONEncoder().encode(error))
        #expect(decoded == .httpStatus && decoded.statusCode == 503 && decoded.retryAfter == 2 && decoded.url == url)
        #expect(decoded.reason == error.reason && decoded.isTransient)
    }

    @Test("A receipt reports its fraction and a matching Foundation Progress")
    func receiptProgress() throws {
        let url = try #require(URL(string: "http://h/f"))
        var receipt = DownloadReceipt(url: url, filename: "f", fileURL: URL(fileURLWithPath: "/tmp/f"))
        #expect(receipt.fractionCompleted == 0)
        #expect(receipt.progress.isIndeterminate)
        receipt.totalBytesWritten = 250
        receipt.totalBytesExpectedToWrite = 1000
        #expect(receipt.fractionCompleted == 0.25)
        #expect(receipt.progress.fractionCompleted == 0.25)
        #expect(receipt.id == url)
        receipt.state = .completed
        #expect(receipt.fractionCompleted == 1)
        let decoded = try JSONDecoder().decode(DownloadReceipt.self, from: JSONEncoder().encode(receipt))
        #expect(decoded == receipt)
    }
}

@Suite("Candidate names")
struct CandidateNamesTests {
    @Test("A name comes first as it is, then numbered before its extension, 10,000 in all")
    func numbered() {
        #expect(
            Array(DownloadDirectory.candidateNames(for: "report.pdf").prefix(3)) == [
                "report.pdf", "report (1).pdf", "report (2).pdf",
            ])
        #expect(Array(DownloadDirectory.candidateNames(for: "README").prefix(2)) == ["README", "README (1)"])
        #expect(Array(DownloadDirectory.candidateNames(for: "a.tar.gz").prefix(2)) == ["a.tar.gz", "a.tar (1).gz"])
        var count = 0
        var last = ""
        for name in DownloadDirectory.candidateNames(for: "x.bin") {
            count += 1
            last = name
        }
        #expect(count == 10_000 && last == "x (9999).bin")
    }
}
