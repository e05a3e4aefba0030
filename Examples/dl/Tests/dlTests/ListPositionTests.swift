import Downloader
import Foundation
import HTTPTestServer
import Testing

@testable import dl

/// `dl -i FILE` read from a saved position (`ListPosition`, `InputFeed.keepPosition(in:)`): seeded lists with
/// comments, blank lines, option lines, CRLF and no final newline.
@Suite("dl list position")
struct ListPositionTests {
    /// One entry of a made-up list: its URL, its option's name, where its URL line starts and its line number.
    struct Made: Equatable {
        var text: String
        var output: String?
        var offset: Int64
        var line: Int
    }

    @Test("From a saved position: every entry once, the part from it first, each with its own line number and options")
    func readsEveryEntryOnce() async throws {
        let trials = SeededTrials(
            "list position", variables: ("DL_POSITION_SEED", "DL_POSITION_TRIALS"), seed: 3401, count: 60)
        let seed = trials.seed
        var random = trials.generator
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("dl-position-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        for trial in 0..<trials.count {
            let (text, entries) = Self.list(entryCount: Int.random(in: 2...40, using: &random), using: &random)
            let list = folder.appendingPathComponent("list-\(trial).txt")
            try Data(text.utf8).write(to: list)
            let start = Int.random(in: 1..<entries.count, using: &random)
            let fd = open(list.path, O_RDONLY)
            let identity = try #require(ListPosition.identity(of: fd))
            close(fd)
            let saved = entries[start]
            ListPosition(identity: identity, offset: saved.offset, line: saved.line - 1).save(in: folder)

            let read = try await Self.entries(of: list, positionIn: folder)
            let expected = Array(entries[start...] + entries[..<start])
            #expect(read == expected, "seed \(seed) trial \(trial): read from entry \(start) of \(entries.count)")
        }
    }

    @Test("A position inside a line, or of a file changed since, is not used: the list is read from the top")
    func stalePositionIsIgnored() async throws {
        var random = SeededGenerator(seed: 7)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("dl-position-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (text, entries) = Self.list(entryCount: 10, using: &random)
        let list = folder.appendingPathComponent("list.txt")
        try Data(text.utf8).write(to: list)
        let fd = open(list.path, O_RDONLY)
        let identity = try #require(ListPosition.identity(of: fd))
        close(fd)

        ListPosition(identity: identity, offset: entries[5].offset + 1, line: 3).save(in: folder)  // inside a line
        #expect(try await Self.entries(of: list, positionIn: folder) == entries)
        var other = identity
        other[2] += 1  // another size: the file changed
        ListPosition(identity: other, offset: entries[5].offset, line: entries[5].line - 1).save(in: folder)
        #expect(try await Self.entries(of: list, positionIn: folder) == entries)
        ListPosition(identity: identity, offset: entries[5].offset, line: entries[5].line - 1).save(in: folder)
        #expect(try await Self.entries(of: list, positionIn: folder).first == entries[5], "the same position, kept")
    }

    /// The entries `dl` reads from `list` with the position saved in `folder`, in order.
    static func entries(of list: URL, positionIn folder: URL) async throws -> [Made] {
        let feed = try InputFeed(path: list.path, for: "-i")
        feed.keepPosition(in: folder)
        _ = try feed.first()
        let read = Locked<[Made]>([])
        let requests = feed.requests { entry in
            let made = Made(text: entry.text, output: entry.output, offset: entry.offset, line: entry.line)
            read.withLock { $0.append(made) }
            return DownloadRequest(URL(string: "http://127.0.0.1/")!)
        }
        for await _ in requests {}
        return read.withLock { $0 }
    }

    /// A list of `entryCount` entries in aria2's format, with comments, blank lines, option lines, CRLF or LF line
    /// ends and sometimes no final newline; and its entries as `dl` should read them.
    static func list(entryCount: Int, using random: inout SeededGenerator) -> (String, [Made]) {
        var text = ""
        var line = 0
        var entries: [Made] = []
        let end = Bool.random(using: &random) ? "\r\n" : "\n"
        for index in 0..<entryCount {
            for _ in 0..<Int.random(in: 0...2, using: &random) {
                text += Bool.random(using: &random) ? "# a comment\(end)" : end
                line += 1
            }
            var made = Made(text: "http://127.0.0.1/e\(index)", offset: Int64(text.utf8.count), line: line + 1)
            text += made.text + (Bool.random(using: &random) ? "\thttp://127.0.0.2/e\(index)" : "") + end
            line += 1
            if Bool.random(using: &random) {
                made.output = "e\(index)-é"
                text += (Bool.random(using: &random) ? "\t" : "  ") + "out=\(made.output!)" + end
                line += 1
            }
            entries.append(made)
        }
        if Bool.random(using: &random) { text.removeLast(end.count) }
        return (text, entries)
    }
}
