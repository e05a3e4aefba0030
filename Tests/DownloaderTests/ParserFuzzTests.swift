import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Random and mutated inputs for every parser that reads what a server sends, and for the file-name sanitiser.
///
/// The suite runs a fast sample; `DOWNLOADER_FUZZ_ITERATIONS=1000000 swift test --filter ParserFuzzTests` runs the
/// full million (`Tests/Reliability/fuzz.sh`). `DOWNLOADER_FUZZ_SEED` changes the seed; every run is reproducible.
@Suite("Parser fuzzing")
struct ParserFuzzTests {
    static let environment = ProcessInfo.processInfo.environment
    /// Under ThreadSanitizer (pure parsers have no races to find) a quarter, so the cooperative threads stay free.
    static let iterations =
        Int(environment["DOWNLOADER_FUZZ_ITERATIONS"] ?? "") ?? (runsUnderSanitizer ? 5_000 : 20_000)
    static let seed = UInt64(environment["DOWNLOADER_FUZZ_SEED"] ?? "") ?? 0x5eed

    /// Well-formed and nearly well-formed examples that mutations start from.
    static let corpus = [
        "bytes 0-99/1000", "bytes */5000", "bytes 100-199/*", "bytes 0-0/1",
        "bytes 99999999999-99999999999/100000000000",
        "attachment; filename=\"report.pdf\"", "attachment; filename*=UTF-8''%E2%82%AC%20rates.txt",
        "inline; filename=\"a;b\\\"c.txt\"; filename*=utf-8'en'x%2Fy", "attachment; filename=../../etc/passwd",
        "120", "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
        "1B2M2Y8AsgTpgAmY7PhCfg==", "md5=1B2M2Y8AsgTpgAmY7PhCfg==, sha-256=abc", "..", "/", "\\\\server\\share\\x.exe",
        "normal.tar.gz", String(repeating: "é", count: 200) + ".bin", "a\u{0}b", "\u{202e}gpj.exe",
        "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:, md5=:1B2M2Y8AsgTpgAmY7PhCfg==:;q=1",
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "SHA-1=da39a3ee5e6b4b0d3255bfef95601890afd80709",
        "d41d8cd98f00b204e9800998ecf8427e", "md5=:1B2M2Y8AsgTpgAmY7PhCfg==:",
    ]

    static let alphabet: [Character] = Array(
        "abcXYZ019 -/\\.;=*\"'%,:\t\r\n\u{0}\u{1}\u{7f}\u{85}\u{202e}\u{feff}éü€😀GMTbytesfilename")

    static func randomInput(_ random: inout SeededGenerator) -> String {
        let length = Int.random(in: 0...60, using: &random)
        return String((0..<length).map { _ in alphabet.randomElement(using: &random)! })
    }

    static func mutate(_ text: String, _ random: inout SeededGenerator) -> String {
        var characters = Array(text)
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            let position = characters.isEmpty ? 0 : Int.random(in: 0..<characters.count, using: &random)
            switch Int.random(in: 0..<5, using: &random) {
            case 0: characters.insert(alphabet.randomElement(using: &random)!, at: position)
            case 1: if !characters.isEmpty { characters.remove(at: position) }
            case 2: if !characters.isEmpty { characters[position] = alphabet.randomElement(using: &random)! }
            case 3:
                characters.insert(contentsOf: characters.prefix(Int.random(in: 0...8, using: &random)), at: position)
            default: characters.insert(contentsOf: String(Int.random(in: 0...Int.max, using: &random)), at: position)
            }
        }
        return String(characters)
    }

    /// Up to three blanks and look-alikes: tabs, spaces of every width, and scalars that are not blanks (a line
    /// separator, a combining mark, a zero-width space).
    static func blanks(_ random: inout SeededGenerator) -> String {
        let kinds: [Unicode.Scalar] = [
            "\t", " ", "\u{A0}", "\u{1680}", "\u{180E}", "\u{2003}", "\u{200A}", "\u{200B}", "\u{200C}", "\u{2028}",
            "\u{202F}", "\u{205F}", "\u{3000}", "\u{301}", "\u{FEFF}", "\n", "a",
        ]
        let count = Int.random(in: 0...3, using: &random)
        let scalars = (0..<count).map { _ in kinds.randomElement(using: &random)! }
        return String(String.UnicodeScalarView(scalars))
    }

    @Test(
        "Random and mutated inputs never crash a parser; sanitised names stay one safe component inside the directory")
    func fuzz() async throws {
        var random = SeededGenerator(seed: Self.seed)
        let directory = URL(fileURLWithPath: "/tmp/fuzz-root", isDirectory: true)
        var accepted = (ranges: 0, names: 0, delays: 0, digests: 0, checksums: 0)
        for iteration in 0..<Self.iterations {
            // Seconds of CPU: let the other tests' tasks run in between instead of holding a cooperative thread.
            if iteration % 256 == 0 { await Task.yield() }
            let input =
                iteration % 2 == 0
                ? Self.randomInput(&random) : Self.mutate(Self.corpus.randomElement(using: &random)!, &random)

            // The sanitiser's own trimming is Foundation's `.whitespaces` trimming, scalar by scalar.
            let padded = Self.blanks(&random) + input + Self.blanks(&random)
            #expect(
                FilenameSanitizer.trimmingBlanks(padded) == padded.trimmingCharacters(in: .whitespaces),
                "\(padded.debugDescription)")

            #expect(ContentRange(input) == ContentRange(reference: input), "\(input.debugDescription)")
            if let parsed = ContentRange(input) {
                accepted.ranges += 1
                if let range = parsed.range {
                    #expect(range.lowerBound >= 0 && range.lowerBound <= range.upperBound, "\(input.debugDescription)")
                    if let complete = parsed.completeLength {
                        #expect(range.upperBound < complete, "\(input.debugDescription)")
                    }
                } else {
                    #expect(parsed.completeLength != nil, "\(input.debugDescription)")
                }
            }
            if let delay = RetryAfter.delay(from: input) {
                accepted.delays += 1
                #expect(delay >= 0 && delay.isFinite, "\(input.debugDescription)")
            }
            let announced = DigestHeaders.announced(
                reprDigest: input, digest: input, contentDigest: input, contentMD5: input, bodyIsWholeFile: true)
            if !announced.isEmpty { accepted.digests += 1 }
            #expect(announced.allSatisfy { $0.digest.count == $0.algorithm.digestLength })
            if let checksum = try? Checksum(parsing: input) {
                accepted.checksums += 1
                #expect((try? Checksum(parsing: checksum.description)) == checksum, "\(input.debugDescription)")
            }
            _ = try? URL.download(input)

            for candidate in [input, ContentDisposition.filename(from: input)].compactMap({ $0 }) {
                // The byte-by-byte shortcut agrees with the full rules wherever it applies.
                if FilenameSanitizer.isPlainlySafe(candidate) {
                    #expect(FilenameSanitizer.sanitizeFully(candidate) == candidate, "\(candidate.debugDescription)")
                }
                guard let name = FilenameSanitizer.sanitize(candidate) else { continue }
                accepted.names += 1
                let safe =
                    !name.isEmpty && !name.contains("/") && !name.contains("\\") && name != ".." && !name.hasPrefix(".")
                    && name.utf8.count <= FilenameSanitizer.maximumLength
                    && !name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7f }
                let inside =
                    directory.appendingPathComponent(name).standardizedFileURL.deletingLastPathComponent()
                    == directory.standardizedFileURL
                #expect(safe && inside, "unsafe name \(name.debugDescription) from \(candidate.debugDescription)")
                if !(safe && inside) { return }
            }
        }
        // The generator reaches every parser's accepting paths, not only its rejections.
        #expect(
            accepted.ranges > 0 && accepted.names > 0 && accepted.delays > 0 && accepted.digests > 0
                && accepted.checksums > 0, "\(accepted)")
    }
}
