import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

@Suite("FileRecord JSON")
struct FileRecordTests {
    @Test("Hand-written records decode with JSONDecoder to exactly the records they were written from")
    func roundTrip() throws {
        var random = SeededGenerator(seed: 52)
        let texts = JournalLineTests.strings + ["\"abc\"", "W/\"x-1\"", "Sat, 28 Nov 2026 17:02:26 GMT"]
        let decoder = JSONDecoder()
        for index in 0..<2_000 {
            var validators = Validators(
                etag: Bool.random(using: &random) ? texts.randomElement(using: &random)! : nil,
                lastModified: Bool.random(using: &random) ? texts.randomElement(using: &random)! : nil)
            validators.lastModifiedIsWeak = [nil, true, false].randomElement(using: &random)!
            var file = FileIdentity(stat())
            file.size = Int64.random(in: 0...Int64.max, using: &random)
            file.inode = UInt64.random(in: 0...UInt64.max, using: &random)
            file.device = [0, UInt64.max, UInt64.random(in: 0...UInt64.max, using: &random)].randomElement(
                using: &random)!
            file.modified = Int64.random(in: Int64.min...Int64.max, using: &random)
            let record = FileRecord(
                validators: validators, length: Int64.random(in: 0...Int64.max, using: &random),
                checksum: [
                    nil, Checksum(algorithm: .sha256, digest: Array(repeating: 9, count: 32)),
                    Checksum(md5: String(repeating: "c", count: 32)),
                ]
                .randomElement(using: &random)!,
                file: file)
            let decoded = try decoder.decode(FileRecord.self, from: Data(record.json()))
            #expect(decoded == record, "record \(index)")
            // What earlier versions wrote with JSONEncoder reads the same.
            #expect(try decoder.decode(FileRecord.self, from: JSONEncoder().encode(record)) == record)
        }
    }
}
