import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Issue #22: the state is ours or it is not used. A state folder, partial area, journal or partial file planted as a
/// symbolic link is never followed, and nothing the manager did not create is deleted.
@Suite("State folder")
final class StateFolderTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var work: URL { workspace.directory }
    /// Someone else's folder, with files a symbolic link could reach.
    var other: URL { work.appendingPathComponent("other") }
    var root: URL { work.appendingPathComponent("root") }

    init() throws {
        workspace = try TestWorkspace()
        try FileManager.default.createDirectory(
            at: other.appendingPathComponent("partial"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try Data("not yours".utf8).write(to: other.appendingPathComponent("journal"))
        try Data("notes".utf8).write(to: other.appendingPathComponent("partial/notes.txt"))
    }

    /// Every entry below `other`, with each regular file's content: what must not change.
    func otherContents() -> [String: String] {
        var result: [String: String] = [:]
        for case let path as String in FileManager.default.enumerator(atPath: other.path)?.allObjects ?? [] {
            let data = try? Data(contentsOf: other.appendingPathComponent(path))
            result[path] = data.map { String(decoding: $0, as: UTF8.self) } ?? "(folder)"
        }
        return result
    }

    func link(_ path: String, to target: URL) throws {
        let at = root.appendingPathComponent(path)
        try FileManager.default.createDirectory(at: at.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: at, withDestinationURL: target)
    }

    func expectRefused(naming name: String) throws {
        let before = otherContents()
        do {
            let manager = try DownloadManager(configuration: .forTests(directory: root))
            Issue.record("a manager opened a state reached through a symbolic link")
            Task { await manager.shutdown() }
        } catch let error as DownloadError {
            #expect(error == .fileSystem)
            #expect(error.reason.contains(name) && error.reason.contains("symbolic link"), "\(error.reason)")
        }
        #expect(otherContents() == before, "nothing outside was touched")
    }

    @Test(
        "On a full disk a file's first save fails with ENOSPC, not with the in-place fallback's ENOENT; a second fits",
        .enabled(if: SmallDisk.isAvailable))
    func fullDiskSaveNamesTheDisk() throws {
        let disk = try SmallDisk(at: work.appendingPathComponent("full"), size: "64k")
        let folder = StateFolder(url: disk.url.appendingPathComponent("state"))
        let old = Data(repeating: 1, count: 300)
        try folder.write(old, to: "kept.state", in: .partial)
        // Fill what is left, so that no new file gets a block.
        let filler = open(disk.url.appendingPathComponent("filler").path, O_WRONLY | O_CREAT, 0o600)
        let block = [UInt8](repeating: 0, count: 4096)
        while write(filler, block, block.count) > 0 {}
        close(filler)
        // A state saved for the first time: the new file gets no room and there is no old one to rewrite in place.
        // The error is the disk's (a transfer's message said "No such file or directory" before; stop 67 at load).
        #expect {
            try folder.write(Data(repeating: 2, count: 300), to: "new.state", in: .partial, inPlaceWhenFull: true)
        } throws: { error in
            (error as? POSIXError)?.code == .ENOSPC
        }
        // A state saved again fits in the blocks of the old one.
        try folder.write(Data(repeating: 3, count: 200), to: "kept.state", in: .partial, inPlaceWhenFull: true)
        #expect(folder.read("kept.state", in: .partial) == Data(repeating: 3, count: 200))
    }

    @Test("A lock taken after the last owner removed the partial area opens the new one (two dl with --wait)")
    func lockAfterPartialAreaRemoved() throws {
        // The waiting owner opened the folders while the other held the lock; the other then cleaned up (its partial
        // area removed, the state folder kept because the waiting one had created the lock file again) and let go.
        let url = work.appendingPathComponent("shared-state")
        let first = StateFolder(url: url)
        let held = try DirectoryLock.acquire(first, timeout: 0)
        let waiting = StateFolder(url: url)
        try waiting.open()
        #expect(first.removePartialAreaIfEmpty())
        held.release()
        let lock = try DirectoryLock.acquire(waiting, timeout: 0)
        defer { lock.release() }
        let fd = try waiting.openFile("a.part", in: .partial, flags: O_WRONLY | O_CREAT)
        _ = close(fd)
        #expect(FileManager.default.fileExists(atPath: url.appendingPathComponent("partial/a.part").path))
    }

    @Test("A state folder that is a symbolic link is refused, naming it; the folder it points to is untouched")
    func symlinkedStateFolder() throws {
        try link(".downloader", to: other)
        try expectRefused(naming: ".downloader")
    }

    @Test("A partial area that is a symbolic link is refused; the folder it points to is untouched")
    func symlinkedPartialArea() throws {
        try FileManager.default.createDirectory(
            at: root.appendingPathComponent(".downloader"), withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        try link(".downloader/partial", to: other.appendingPathComponent("partial"))
        try expectRefused(naming: "partial")
    }

    @Test("A journal that is a symbolic link is refused and never written through")
    func symlinkedJournal() throws {
        try FileManager.default.createDirectory(
            at: root.appendingPathComponent(".downloader/partial"), withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        try link(".downloader/journal", to: other.appendingPathComponent("journal"))
        try expectRefused(naming: "journal")
    }

    @Test("A partial file planted as a symbolic link is never written through; the download still ends right")
    func symlinkedPartialFile() async throws {
        let manager = try DownloadManager(configuration: .forTests(directory: root))
        let url = server.url("/bytes/planted?size=300000")
        let target = other.appendingPathComponent("target.bin")
        try Data("precious".utf8).write(to: target)
        // Planted after the manager opened its folder, as a process racing it would.
        try FileManager.default.createSymbolicLink(
            at: DownloadDirectory(root: root).partialFile(for: url), withDestinationURL: target)
        let receipt = try await manager.download(url)
        #expect(try md5OfFile(receipt.fileURL) == TestContent(name: "planted", size: 300_000).md5)
        #expect(try String(contentsOf: target, encoding: .utf8) == "precious")
        await manager.shutdown()
    }

    /// A run that leaves nothing unfinished: a manager that removes its state when finished, one 2,000-byte download
    /// checked, and its shutdown.
    /// - Parameter name: the file's name on the test server.
    private func finishedRun(downloading name: String) async throws {
        var configuration = DownloadManager.Configuration.forTests(directory: root)
        configuration.removesStateWhenFinished = true
        let manager = try DownloadManager(configuration: configuration)
        let receipt = try await manager.download(server.url("/bytes/\(name)?size=2000"))
        #expect(try md5OfFile(receipt.fileURL) == TestContent(name: name, size: 2000).md5)
        await manager.shutdown()
    }

    @Test("A stranger's file in the partial area survives recovery and the clean-up of a finished run")
    func strangerInPartialArea() async throws {
        let partial = root.appendingPathComponent(".downloader/partial")
        try FileManager.default.createDirectory(
            at: partial, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let notes = partial.appendingPathComponent("notes.txt")
        try Data("mine".utf8).write(to: notes)
        try await finishedRun(downloading: "clean")
        #expect(try String(contentsOf: notes, encoding: .utf8) == "mine")
        let left =
            (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(".downloader").path))
        #expect(left == ["partial"], "only the folder holding the stranger's file is left: \(left ?? [])")
    }

    @Test(
        "A batch's spill file that a kill left by its name (killed between creating and unlinking it) goes at the next start"
    )
    func spillLeftByAKill() async throws {
        // `RequestSpill` creates its file by name and unlinks it at once; a kill -9 between the two leaves the name. dl's
        // list chaos trials found it: the last run completed the list, and its state folder stayed for that one file.
        let state = root.appendingPathComponent(".downloader")
        try FileManager.default.createDirectory(
            at: state, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try Data("https://example.com/a\t{}\n".utf8).write(to: state.appendingPathComponent(".spill-2699-1253796318"))
        try await finishedRun(downloading: "after-spill")
        let left = try? FileManager.default.contentsOfDirectory(atPath: state.path)
        #expect(left == nil, "the state folder is gone with nothing unfinished; it held \(left ?? [])")
    }
}

@Suite("Free space estimate")
struct FreeSpaceEstimateTests {
    @Test("Claims that fit in a recent measurement need no new one; the rest, or a stale one, ask for it")
    func claims() {
        let start = ContinuousClock.now
        var estimate = FreeSpaceEstimate(measured: 10_000, at: start)
        let first = estimate.claim(6_000, at: start)
        let second = estimate.claim(4_000, at: start + .milliseconds(500))
        let third = estimate.claim(1, at: start + .milliseconds(600))
        #expect(first && second && !third)  // the third: all of it claimed, measure again
        var fresh = FreeSpaceEstimate(measured: 10_000, at: start)
        let tooMuch = fresh.claim(10_001, at: start)
        let tooOld = fresh.claim(1, at: start + FreeSpaceEstimate.lifetime)
        let tooEarly = fresh.claim(1, at: start - .milliseconds(1))
        #expect(!tooMuch && !tooOld && !tooEarly && fresh.claimed == 0)
    }

    @Test("Seeded claims never accept more bytes than a measurement showed, nor one older than its lifetime")
    func seededClaims() {
        let start = ContinuousClock.now
        for seed in UInt64(1)...200 {
            var random = SeededGenerator(seed: seed)
            let measured = Int64.random(in: 0...1_000_000, using: &random)
            var estimate = FreeSpaceEstimate(measured: measured, at: start)
            var accepted: Int64 = 0
            for _ in 0..<50 {
                let needed = Int64.random(in: 0...100_000, using: &random)
                let at = start + .milliseconds(Int.random(in: -10...1_200, using: &random))
                guard estimate.claim(needed, at: at) else { continue }
                accepted += needed
                #expect(at >= start && at - start < FreeSpaceEstimate.lifetime, "seed \(seed)")
            }
            #expect(accepted <= measured && accepted == estimate.claimed, "seed \(seed)")
        }
    }
}
