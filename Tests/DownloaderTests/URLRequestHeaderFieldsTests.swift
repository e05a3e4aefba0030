import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("URLRequest header fields")
struct URLRequestHeaderFieldsTests {
    /// Names the package sets, and other spellings of them and of callers' fields.
    static let names = ["Accept-Encoding", "Range", "If-Range", "User-Agent"]
    static let otherNames = ["accept-encoding", "RANGE", "if-range", "user-agent", "X-Api-Key", "x-api-key", "Cookie"]
    static let values = ["identity", "bytes=0-1023", "\"etag\"", "dl/1.0 (Linux)", "a\r\nInjected: 1", "é", "", " x "]
    /// How many seeded mixes each test runs (`DOWNLOADER_HEADER_SEEDS` replays 1...N).
    static let seeds = UInt64(ProcessInfo.processInfo.environment["DOWNLOADER_HEADER_SEEDS"] ?? "") ?? 300

    @Test("setPackageField leaves the same fields as setValue, over seeded mixes of callers' fields and the package's")
    func sameAsSetValue() {
        for seed in 1...Self.seeds {
            var random = SeededGenerator(seed: seed)
            var fast = URLRequest(url: URL(string: "http://127.0.0.1:1/file")!)
            if random.next() % 2 == 0 {
                // Fields as a `prepareRequest` hook may set them: any case, not capitalized by corelibs.
                fast.allHTTPHeaderFields = [
                    Self.otherNames.randomElement(using: &random)!: Self.values.randomElement(using: &random)!
                ]
            }
            var reference = fast
            for _ in 0..<Int(random.next() % 6) {
                let name = Self.otherNames.randomElement(using: &random)!
                let value = Self.values.randomElement(using: &random)!
                fast.setValue(value, forHTTPHeaderField: name)
                reference.setValue(value, forHTTPHeaderField: name)
            }
            for _ in 0..<Int(1 + random.next() % 4) {
                let name = Self.names.randomElement(using: &random)!
                let value = Self.values.randomElement(using: &random)!
                fast.setPackageField(value, for: name)
                reference.setValue(value, forHTTPHeaderField: name)
            }
            #expect(
                fast.allHTTPHeaderFields == reference.allHTTPHeaderFields,
                "seed \(seed) (DOWNLOADER_HEADER_SEEDS replays 1...N)")
        }
    }

    @Test("setPackageFields leaves the same fields as setValue for each in order, over seeded mixes")
    func severalSameAsSetValue() {
        for seed in 1...Self.seeds {
            var random = SeededGenerator(seed: seed)
            var fast = URLRequest(url: URL(string: "http://127.0.0.1:1/file")!)
            for _ in 0..<Int(random.next() % 4) {
                fast.setValue(
                    Self.values.randomElement(using: &random)!,
                    forHTTPHeaderField: Self.otherNames.randomElement(using: &random)!)
            }
            var reference = fast
            let fields = (0..<Int(random.next() % 5)).map { _ in
                (name: Self.names.randomElement(using: &random)!, value: Self.values.randomElement(using: &random)!)
            }
            fast.setPackageFields(fields)
            for (name, value) in fields { reference.setValue(value, forHTTPHeaderField: name) }
            #expect(
                fast.allHTTPHeaderFields == reference.allHTTPHeaderFields,
                "seed \(seed) (DOWNLOADER_HEADER_SEEDS replays 1...N): \(fields)")
        }
    }

    @Test("Field names compare equal ignoring the case of ASCII letters only")
    func caseInsensitiveNames() {
        #expect(URLRequest.equalIgnoringASCIICase("If-Range", "if-range"))
        #expect(URLRequest.equalIgnoringASCIICase("RANGE", "range"))
        #expect(!URLRequest.equalIgnoringASCIICase("Range", "Rangé"))
        #expect(!URLRequest.equalIgnoringASCIICase("A-B", "A\rB"))  // '-' | 0x20 is '\r' | 0x20: not letters
        #expect(!URLRequest.equalIgnoringASCIICase("Range", "Ranges"))
    }
}
