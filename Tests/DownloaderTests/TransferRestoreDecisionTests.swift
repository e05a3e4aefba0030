import Foundation
import Testing

@testable import Downloader

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The restore rules as a value (`Transfer.decideRestore`, issue #33), without files or sockets.
@Suite("Transfer restore decision")
struct TransferRestoreDecisionTests {
    static let url = URL(string: "http://127.0.0.1/file")!
    static let date = "Tue, 14 Nov 2023 22:13:20 GMT"

    static func identity(size: Int64, inode: UInt64 = 7) -> FileIdentity {
        var info = stat()
        info.st_size = off_t(size)
        info.st_ino = ino_t(inode)
        return FileIdentity(info)
    }

    static func saved(
        hashed: Int64 = 1000, file: FileIdentity? = identity(size: 1000), segments: [Range<Int64>]? = nil,
        boot: String? = "boot-1", ignoresETag: Bool = false
    ) -> PartialState {
        PartialState(
            url: url, hashedLength: hashed, hash: StreamingHash(.md5),
            validators: Validators(etag: ignoresETag ? nil : "\"v-a\"", lastModified: date), totalLength: 4000,
            rangesSupported: true, ignoresETag: ignoresETag, segments: segments, file: file, boot: boot)
    }

    static func probe(etag: String? = "\"v-a\"", date: String? = date, length: Int64? = 4000) -> Transfer.Probe {
        Transfer.Probe(
            totalLength: length, acceptsRanges: true, validators: Validators(etag: etag, lastModified: date),
            suggestedFilename: nil, announced: [])
    }

    static func decide(
        _ saved: PartialState, _ identity: FileIdentity = identity(size: 1000), probe: Transfer.Probe? = probe(),
        boot: String? = "boot-1"
    ) -> Transfer.RestoreDecision {
        Transfer.decideRestore(saved: saved, identity: identity, probe: probe, boot: boot, name: "f.part")
    }

    static func plan(_ decision: Transfer.RestoreDecision) -> Transfer.RestorePlan? {
        if case .resume(let plan) = decision { return plan }
        return nil
    }

    @Test("A file as its state left it continues from its end without checking its prefix")
    func untouched() throws {
        let plan = try #require(Self.plan(Self.decide(Self.saved())))
        #expect(!plan.checksPrefix && plan.keptLength == 1000 && plan.warnings.isEmpty)
        #expect(plan.metadata.validators.etag == "\"v-a\"" && plan.metadata.totalLength == 4000)
        // Without HEAD's answer the saved version stands.
        #expect(Self.plan(Self.decide(Self.saved(), probe: nil))?.keptLength == 1000)
    }

    @Test("Another version, or another length, starts over and says why")
    func otherVersion() {
        let changed = Self.decide(
            Self.saved(), probe: Self.probe(etag: "\"v-b\"", date: "Wed, 15 Nov 2023 1:00:00 GMT"))
        #expect(changed == .startOver(warning: "the resource changed (validators differ); starting from byte 0"))
        let longer = Self.decide(Self.saved(), probe: Self.probe(length: 5000))
        #expect(
            longer == .startOver(warning: "the resource's length changed from 4000 to 5000; starting from byte 0"))
    }

    @Test("HEAD from a backend with another ETag, same length and date: the bytes stay, ETags are ignored from now on")
    func otherETag() throws {
        let plan = try #require(Self.plan(Self.decide(Self.saved(), probe: Self.probe(etag: "\"v-b\""))))
        #expect(plan.keptLength == 1000 && plan.metadata.ignoresETag && plan.metadata.validators.etag == nil)
        #expect(plan.warnings.count == 1)
        // A state that already ignores ETags takes any ETag.
        let ignoring = Self.saved(ignoresETag: true)
        let again = try #require(Self.plan(Self.decide(ignoring, probe: Self.probe(etag: "\"v-c\""))))
        #expect(again.warnings.isEmpty && again.metadata.ignoresETag)
    }

    @Test("A file changed since its state (a crash after more bytes) is checked; after a reboot it is cut back")
    func changedFile() throws {
        let grown = Self.identity(size: 1500)
        let sameBoot = try #require(Self.plan(Self.decide(Self.saved(), grown)))
        #expect(sameBoot.checksPrefix && sameBoot.keptLength == 1500)
        let rebooted = try #require(Self.plan(Self.decide(Self.saved(), grown, boot: "boot-2")))
        #expect(rebooted.checksPrefix && rebooted.keptLength == 1000)
        // Listed segments were synced before their state: kept after a reboot.
        let segmented = Self.saved(file: Self.identity(size: 3000), segments: [2000..<3000])
        let kept = try #require(Self.plan(Self.decide(segmented, Self.identity(size: 3100), boot: "boot-2")))
        #expect(kept.keptLength == 3100 && kept.segments == [2000..<3000])
    }

    @Test("Files that cannot be what the state says start over with a warning")
    func impossibleFiles() {
        let shorter = Self.decide(Self.saved(hashed: 2000, file: Self.identity(size: 2000)), Self.identity(size: 1500))
        #expect(shorter == .startOver(warning: "f.part is shorter than its saved state; starting from byte 0"))
        let longer = Self.decide(Self.saved(), Self.identity(size: 4001))
        #expect(longer == .startOver(warning: "f.part is longer than the resource; starting from byte 0"))
        for segments: [Range<Int64>] in [[500..<900], [2000..<3000, 2500..<3500], [3000..<5000], [1500..<1500]] {
            let decision = Self.decide(Self.saved(segments: segments), Self.identity(size: 4000))
            #expect(
                decision
                    == .startOver(warning: "the saved segments of f.part do not fit the file; starting from byte 0"),
                "\(segments)")
        }
    }
}

extension TransferRestoreDecisionTests {
    static func record(
        etag: String? = "\"v-a\"", checksum: Checksum? = Checksum(md5: String(repeating: "a", count: 32))
    )
        -> FileRecord
    {
        FileRecord(
            validators: Validators(etag: etag, lastModified: date), length: 4000, checksum: checksum,
            file: identity(size: 4000))
    }

    @Test("A recorded file answers only when HEAD proves its version and every checksum known agrees")
    func reuse() {
        let md5 = Checksum(md5: String(repeating: "a", count: 32))!
        let other = Checksum(md5: String(repeating: "b", count: 32))!
        func decide(
            _ record: FileRecord = Self.record(), probe: Transfer.Probe = Self.probe(), checksum: Checksum?,
            expected: Checksum?,
            hashes: Bool = true
        ) -> Verification? {
            Transfer.decideReuse(record: record, probe: probe, checksum: checksum, expected: expected, hashes: hashes)
        }
        #expect(decide(checksum: md5, expected: nil) == .computed(md5))
        #expect(decide(checksum: md5, expected: md5) == .checksum(md5))
        #expect(decide(checksum: md5, expected: other) == nil, "another expectation: fetched again")
        #expect(decide(probe: Self.probe(etag: "\"v-b\""), checksum: md5, expected: nil) == nil, "another version")
        #expect(decide(probe: Self.probe(length: 4001), checksum: md5, expected: nil) == nil, "another length")
        #expect(
            decide(Self.record(etag: nil), probe: Self.probe(etag: nil, date: nil), checksum: md5, expected: nil) == nil
        )
        var announcing = Self.probe()
        announcing.announced = [other]
        #expect(decide(probe: announcing, checksum: md5, expected: nil) == nil, "the server announces another digest")
        #expect(decide(checksum: nil, expected: nil, hashes: false) == .lengthOnly)
        #expect(decide(checksum: nil, expected: nil, hashes: true) == nil, "a digest is wanted and none is known")
    }
}
