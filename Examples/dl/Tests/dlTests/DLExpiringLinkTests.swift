import Downloader
import Foundation
import HTTPTestServer
import Testing

/// Issue #36: a signed link that expires mid-download, and the fresh link the user gets for the same file. On
/// d1ecfd3 `dl -o NAME NEWURL` fetched the whole file again and left the old partial and a failed entry behind.
@Suite("dl expiring links")
final class DLExpiringLinkTests: Sendable, DLFileChecks {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var work: URL { workspace.directory }

    init() throws {
        workspace = try TestWorkspace(prefix: "dl-expiring")
    }

    @Test("dl -o NAME NEWURL continues the partial file of the expired link: by Range, one entry, the right bytes")
    func freshLinkContinues() async throws {
        let size = 600_000
        // The first link's signature answers one GET, which the server cuts after 200,000 bytes; the next GET is
        // refused as expired (403). -T 300: a machine that stalls for 30 s before the first body byte made dl retry
        // (rightly), and the retry met the expired signature with nothing to keep (CI, once).
        let old = server.url("/bytes/signed.bin?size=\(size)&sig=1&sigUses=1&drop=200000")
        let first = try await DLProcess.run(["-T", "300", "-o", "file.bin", old.absoluteString], in: work)
        #expect(first.status == 1 && first.stderr.contains("403"), "\(first.stderr)")
        let partials = entries(work.appendingPathComponent(".dl/partial")).filter { $0.hasSuffix(".part") }
        #expect(
            partials.count == 1,
            """
            the partial file is kept: \(partials); requests: \(server.statistics.requests(path: "/bytes/signed.bin")
                .map { "\($0.method) \($0.range ?? "-")" }); dl said: \(first.stderr)
            """)

        let fresh = server.url("/bytes/signed.bin?size=\(size)&sig=2&sigUses=100")
        let second = try await DLProcess.run(["-o", "file.bin", fresh.absoluteString], in: work)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stderr.contains("continuing the partial file"), "it says so: \(second.stderr)")
        #expect(try md5(work.appendingPathComponent("file.bin")) == content("signed.bin", size))
        let freshGets = server.statistics.requests(path: "/bytes/signed.bin").filter {
            $0.method == "GET" && $0.target.contains("sig=2")
        }
        #expect(!freshGets.isEmpty && freshGets.allSatisfy { ($0.rangeStart ?? 0) > 0 }, "\(freshGets.map(\.range))")
        // Nothing unfinished is left: no failed entry of the old link, so dl removed its state folder.
        #expect(!FileManager.default.fileExists(atPath: work.appendingPathComponent(".dl").path))
        #expect(entries(work) == ["file.bin"])
    }

    @Test(
        "A link signed again, without -o (same name, another query), continues the partial file and says so (issue #48)"
    )
    func resignedLinkContinues() async throws {
        let size = 600_000
        let dir = work.appendingPathComponent("resigned")
        let old = server.url("/bytes/resign.bin?size=\(size)&sig=1&sigUses=2&dropAt=300000")
        let first = try await DLProcess.run(["-T", "300", "-q", "-d", dir.path, old.absoluteString], in: work)
        #expect(first.status == 1 && first.stderr.contains("403"), "\(first.stderr)")
        let partial = dir.appendingPathComponent(".dl/partial")
        let kept = try FileManager.default.contentsOfDirectory(atPath: partial.path).filter { $0.hasSuffix(".part") }
            .reduce(Int64(0)) { total, name in
                let attributes = try? FileManager.default.attributesOfItem(
                    atPath: partial.appendingPathComponent(name).path)
                return total + ((attributes?[.size] as? NSNumber)?.int64Value ?? 0)
            }
        #expect(kept >= 250_000, "the first link left bytes to continue: \(kept)")
        let sentBefore = server.statistics.bodyBytesSent
        let fresh = server.url("/bytes/resign.bin?size=\(size)&sig=2&sigUses=100")
        let second = try await DLProcess.run(["-d", dir.path, fresh.absoluteString], in: work)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stderr.contains("continuing the partial file"), "it says so: \(second.stderr)")
        #expect(try md5(dir.appendingPathComponent("resign.bin")) == content("resign.bin", size))
        let served = server.statistics.bodyBytesSent - sentBefore
        // The rest, not the whole file again (1.45 times it before): the kept bytes are not served twice.
        #expect(served <= Int64(size) - kept + Int64(size) / 10, "served \(served), \(kept) of \(size) were kept")
        // One entry: nothing of the old link is left unfinished.
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent(".dl").path))
    }
}
