import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Requests parked on disk by a batch (issue #34): read back equal and in order, however many, with parking and
/// reading interleaved; nothing left in the state folder; credentials never written.
@Suite("Request spill")
struct RequestSpillTests {
    let workspace: TestWorkspace
    let folder: StateFolder

    init() throws {
        workspace = try TestWorkspace()
        folder = StateFolder(url: workspace.directory.appendingPathComponent("state"))
        try folder.open()
    }

    /// Seeded requests: runs of shared options with a change now and then, as a list with per-line options reads.
    func requests(_ count: Int, seed: UInt64) -> [DownloadRequest] {
        var random = SeededGenerator(seed: seed)
        var options = DownloadOptions()
        return (0..<count).map { index in
            if Int.random(in: 0..<50, using: &random) == 0 {
                options = DownloadOptions()
                options.headers = ["X-Run": String(index)]
                if Bool.random(using: &random) { options.expectedMD5 = String(repeating: "ab", count: 16) }
                if Bool.random(using: &random) { options.naming = .custom("name \(index) \"quoted\"\t.bin") }
                options.priority = Int.random(in: -3...3, using: &random)
            }
            return DownloadRequest(URL(string: "http://127.0.0.1:1/files/\(index)?q=\(index % 7)")!, options: options)
        }
    }

    @Test("Requests read back equal and in order, parking and reading interleaved, across many writes")
    func roundTrip() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        let all = requests(20_000, seed: seed)  // about 1 MB: many 64 KiB writes
        let spill = try #require(RequestSpill(in: folder))
        var random = SeededGenerator(seed: seed)
        var read: [DownloadRequest] = []
        for request in all {
            #expect(spill.park(request), "seed \(seed)")
            if Int.random(in: 0..<3, using: &random) == 0, let next = spill.next() { read.append(next) }
        }
        while let next = spill.next() { read.append(next) }
        #expect(spill.count == 0)
        #expect(read == all, "seed \(seed)")
        #expect(folder.names(in: .state).filter { $0.hasPrefix(".spill") }.isEmpty, "the file is unlinked at once")
    }

    @Test("Its file's names are recognised as its own (a kill may leave one); no other name is")
    func fileNames() {
        for _ in 0..<100 { #expect(RequestSpill.isFileName(RequestSpill.newFileName())) }
        let others = [".spill-", ".spill-12", ".spill-12-", ".spill--3", ".spill-12-ab", "spill-1-2", ".spill-1-2-3"]
        for name in others { #expect(!RequestSpill.isFileName(name), "\(name)") }
    }

    @Test("Secrets (credentials in a URL or mirror, secret headers) and relative URLs are never parked")
    func refusesWhatCannotBeWritten() throws {
        let spill = try #require(RequestSpill(in: folder))
        #expect(!spill.park(DownloadRequest(URL(string: "http://user:secret@127.0.0.1:1/a")!)))
        for header in ["Authorization", "cookie", "Proxy-Authorization"] {
            var options = DownloadOptions()
            options.headers = [header: "secret"]
            #expect(!spill.park(DownloadRequest(URL(string: "http://127.0.0.1:1/a")!, options: options)), "\(header)")
        }
        var mirrored = DownloadOptions()
        mirrored.mirrors = [URL(string: "http://user:secret@127.0.0.1:2/a")!]
        #expect(!spill.park(DownloadRequest(URL(string: "http://127.0.0.1:1/a")!, options: mirrored)))
        let base = URL(string: "http://127.0.0.1:1/dir/")!
        #expect(!spill.park(DownloadRequest(URL(string: "b", relativeTo: base)!)))
        #expect(spill.park(DownloadRequest(URL(string: "http://127.0.0.1:1/c")!)))
        #expect(spill.next()?.url.absoluteString == "http://127.0.0.1:1/c")
        #expect(spill.next() == nil)
    }
}
