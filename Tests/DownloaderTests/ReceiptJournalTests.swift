import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

@Suite("ReceiptJournal")
struct ReceiptJournalTests {
    static let url = URL(string: "http://127.0.0.1:1/file")!

    func entry(_ state: DownloadState, _ url: URL = Self.url) -> JournalEntry {
        JournalEntry(
            ReceiptRecord(
                receipt: DownloadReceipt(url: url, filename: "file", fileURL: URL(fileURLWithPath: "/x"), state: state),
                options: DownloadOptions()))
    }

    /// A state folder in a new temporary directory (the caller removes the directory).
    func makeStateFolder() throws -> (directory: TemporaryDirectory, folder: StateFolder) {
        let directory = try TemporaryDirectory()
        return (directory, StateFolder(url: directory.url.appendingPathComponent("state")))
    }

    /// The placement line of `url`'s verified file, named "file", about to move.
    let placing = JournalEntry(
        placing: Self.url, options: DownloadOptions(), name: "file", length: 10, checksum: nil, suggested: nil)

    @Test("A placement sticks to its download until a completed line or a removal supersedes it")
    func placementSticks() throws {
        let (directory, folder) = try makeStateFolder()
        defer { directory.remove() }
        let journal = try ReceiptJournal.open(folder).journal
        journal.appendNow([.put(placing)])
        journal.appendNow([.put(entry(.downloading))])  // the manager's record, lagging behind the transfer
        journal.close()
        #expect(try ReceiptJournal.open(folder).entries.first?.placement?.name == "file")

        let again = try ReceiptJournal.open(folder).journal
        again.appendNow([.put(entry(.completed))])
        again.appendNow([.put(entry(.suspended))])
        again.close()
        #expect(try ReceiptJournal.open(folder).entries.first?.placement == nil, "completed superseded it")
    }

    /// The placement line of a batch's download, which forgets it once placed.
    let placingForgotten = JournalEntry(
        placing: Self.url, options: DownloadOptions(), name: "file", length: 10, checksum: nil, suggested: nil,
        forgetsWhenPlaced: true)

    /// The journal's lines, as text.
    func lines(_ folder: StateFolder) -> [Substring] {
        let text = folder.read(ReceiptJournal.name, in: .state).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return text.split(separator: "\n")
    }

    @Test("A placement that forgets its download stands for the removal that keeps the placed file, and only for it")
    func forgettingPlacementStandsForRemoval() throws {
        let (directory, folder) = try makeStateFolder()
        defer { directory.remove() }
        let journal = try ReceiptJournal.open(folder).journal
        journal.appendNow([.put(placingForgotten)])
        journal.noteRemoval(Self.url, keepsPlacedFile: true)
        journal.flush()
        #expect(lines(folder).count == 1, "no removal line: \(lines(folder))")

        // Asked again, placed again, then removed with its files (not kept): the removal is written.
        journal.appendNow([.put(entry(.queued)), .put(placingForgotten)])
        journal.noteRemoval(Self.url)
        journal.flush()
        #expect(lines(folder).last?.contains("{\"remove\"") == true, "\(lines(folder))")

        // A later line of the manager's (its record lags behind the transfer) carries the placement and its forgetting:
        // it stands for the removal in turn.
        journal.appendNow([.put(placingForgotten)])
        journal.append([.put(entry(.downloading))])
        journal.noteRemoval(Self.url, keepsPlacedFile: true)
        journal.flush()
        let carried = lines(folder)
        #expect(carried.last?.contains("\"state\":\"downloading\"") == true, "\(carried)")
        #expect(carried.last?.contains("\"forgetsWhenPlaced\":true") == true, "\(carried)")

        // A completed line (someone else still wanted the download) supersedes the placement: the removal is written.
        journal.appendNow([.put(placingForgotten)])
        journal.append([.put(entry(.completed))])
        journal.noteRemoval(Self.url, keepsPlacedFile: true)
        journal.close()
        #expect(lines(folder).last?.contains("{\"remove\"") == true, "\(lines(folder))")
        #expect(try ReceiptJournal.open(folder).entries.isEmpty)
    }

    @Test("Placements that stand for removals are dropped by compaction: the file stays proportional to the receipts")
    func forgettingPlacementsCompact() throws {
        let (directory, folder) = try makeStateFolder()
        defer { directory.remove() }
        let file = folder.url(of: ReceiptJournal.name, in: .state)
        let journal = try ReceiptJournal.open(folder).journal
        let kept = URL(string: "http://127.0.0.1:1/kept")!
        journal.appendNow([.put(entry(.suspended, kept))])
        var largest: Int64 = 0
        for index in 0..<5_000 {
            let url = URL(string: "http://127.0.0.1:1/batch/\(index)")!
            journal.append([.put(entry(.queued, url))])
            journal.appendNow([
                .put(
                    JournalEntry(
                        placing: url, options: DownloadOptions(), name: "\(index)", length: 10, checksum: nil,
                        suggested: nil, forgetsWhenPlaced: true))
            ])
            journal.noteRemoval(url, keepsPlacedFile: true)
            if index % 500 == 0 { largest = max(largest, fileSize(file) ?? 0) }
        }
        journal.close()
        #expect(largest < 600 * 1024, "compacted: \(largest) bytes")
        let entries = try ReceiptJournal.open(folder).entries
        // What follows the last compaction is read back (recovery forgets those whose files were placed); the
        // download that is not a batch's stays, first.
        #expect(entries.first?.url == kept)
        #expect(entries.dropFirst().allSatisfy { $0.forgetsWhenPlaced == true && $0.placement != nil })
        #expect(entries.count < 2_500)
    }

    @Test("A noted removal is written after the lines handed over before it and before those handed over after it")
    func notedRemovalKeepsItsPlace() throws {
        let (directory, folder) = try makeStateFolder()
        defer { directory.remove() }
        let journal = try ReceiptJournal.open(folder).journal
        let other = URL(string: "http://127.0.0.1:1/other")!
        // Removed, asked for again, and placed before the manager's next save: the placement must stay on record.
        journal.noteRemoval(Self.url)
        journal.appendNow([.put(placing)])
        // Saved, then removed before the save was written: it stays removed.
        journal.append([.put(entry(.downloading, other))])
        journal.noteRemoval(other)
        journal.close()
        let entries = try ReceiptJournal.open(folder).entries
        #expect(entries.map(\.url) == [Self.url])
        #expect(entries.first?.placement?.name == "file")
    }

    @Test("Seeded mixes of saves, placements, removals and flushes leave each download as its last change left it")
    func notedRemovalsSeeded() throws {
        let seeds = UInt64(ProcessInfo.processInfo.environment["DOWNLOADER_JOURNAL_SEEDS"] ?? "") ?? 40
        for seed in 1...seeds {
            let (directory, folder) = try makeStateFolder()
            defer { directory.remove() }
            let journal = try ReceiptJournal.open(folder).journal
            let urls = (0..<4).map { URL(string: "http://127.0.0.1:1/\($0)")! }
            var random = SeededGenerator(seed: seed)
            var present: [URL: Bool] = [:]
            for _ in 0..<400 {
                let url = urls[Int(random.next() % 4)]
                switch random.next() % 4 {
                case 0:
                    journal.append([.put(entry(.downloading, url))])
                    present[url] = true
                case 1:
                    journal.appendNow([.put(entry(.suspended, url))])
                    present[url] = true
                case 2:
                    journal.noteRemoval(url)
                    present[url] = false
                default:
                    journal.flush()
                }
            }
            journal.close()
            let found = Set(try ReceiptJournal.open(folder).entries.map(\.url))
            let expected = Set(present.filter(\.value).keys)
            #expect(found == expected, "seed \(seed) (DOWNLOADER_JOURNAL_SEEDS replays 1...N)")
        }
    }

    @Test("Seeded changes over many compactions: right after each one, every download's last state, in order")
    func compactionSeeded() throws {
        let seeds = UInt64(ProcessInfo.processInfo.environment["DOWNLOADER_JOURNAL_SEEDS"] ?? "") ?? 3
        let states: [DownloadState] = [.queued, .downloading, .suspended, .failed]
        for seed in 1...seeds {
            let (directory, folder) = try makeStateFolder()
            defer { directory.remove() }
            let file = folder.url(of: ReceiptJournal.name, in: .state)
            var journal = try ReceiptJournal.open(folder).journal
            let urls = (0..<12).map { URL(string: "http://127.0.0.1:1/\($0)")! }
            var random = SeededGenerator(seed: seed)
            var model: [URL: DownloadState] = [:]
            // The order a compacted journal keeps: first appearance; a download removed and asked for again comes last.
            var order: [URL] = []
            var (size, compactions): (Int64, Int) = (0, 0)
            // About 2 MB of lines: the file passes 256 KiB, and is compacted, several times.
            for _ in 0..<8_000 {
                let url = urls[Int(random.next() % 12)]
                let state = states[Int(random.next() % 4)]
                let action = random.next() % 8
                if action == 0 {
                    order.removeAll { $0 == url }
                } else if model[url] == nil {
                    order.append(url)
                }
                switch action {
                case 0:
                    journal.noteRemoval(url)
                    model[url] = nil
                case 1:
                    journal.appendNow([.put(entry(state, url))])
                    model[url] = state
                default:
                    journal.append([.put(entry(state, url))])
                    model[url] = state
                }
                journal.flush()
                let now = fileSize(file) ?? 0
                defer { size = now }
                guard now < size else { continue }
                // Compacted by this change: what is on disk now must be every download's last state.
                compactions += 1
                journal.close()
                let (reopened, entries, problem) = try ReceiptJournal.open(folder)
                let found = Dictionary(uniqueKeysWithValues: entries.map { ($0.url, $0.state) })
                #expect(problem == nil && found == model, "seed \(seed) (DOWNLOADER_JOURNAL_SEEDS replays 1...N)")
                #expect(entries.map(\.url) == order, "seed \(seed): the order after compaction")
                // One line a download: one removed and asked for again is not copied twice.
                let lines = try Data(contentsOf: file).filter { $0 == 0x0a }.count
                #expect(lines == model.count, "seed \(seed): \(lines) lines for \(model.count) downloads")
                journal = reopened
            }
            journal.close()
            #expect(compactions >= 3, "seed \(seed): \(compactions) compactions")
            let last = try ReceiptJournal.open(folder).entries
            let states = Dictionary(uniqueKeysWithValues: last.map { ($0.url, $0.state) })
            #expect(states == model, "seed \(seed) (DOWNLOADER_JOURNAL_SEEDS replays 1...N)")
        }
    }

    @Test("Thousands of changes to a few receipts keep the file proportional to the receipts (compaction)")
    func compaction() throws {
        let (directory, folder) = try makeStateFolder()
        defer { directory.remove() }
        let file = folder.url(of: ReceiptJournal.name, in: .state)
        let journal = try ReceiptJournal.open(folder).journal
        let urls = (0..<10).map { URL(string: "http://127.0.0.1:1/\($0)")! }
        var largest: Int64 = 0
        for round in 0..<5_000 {
            journal.append([.put(entry(round % 2 == 0 ? .downloading : .suspended, urls[round % 10]))])
            if round % 500 == 0 {
                journal.flush()
                largest = max(largest, fileSize(file) ?? 0)
            }
        }
        journal.close()
        let one = try JSONEncoder().encode(JournalLine.put(entry(.suspended, urls[0]))).count + 1
        #expect(largest < 300 * 1024 + 2 * 10 * one, "compacted: never far above 256 KiB for 10 receipts")
        let (_, entries, problem) = try ReceiptJournal.open(folder)
        #expect(entries.count == 10 && problem == nil)
        #expect(entries.map(\.url) == urls, "compaction keeps the order in which downloads first appeared")
        // The last change of receipt i was in round 4990 + i: even rounds wrote downloading, odd ones suspended.
        #expect(
            entries.allSatisfy { $0.state == (Int($0.url.lastPathComponent)! % 2 == 0 ? .downloading : .suspended) })
    }
}

@Suite("JournalLine JSON")
struct JournalLineTests {
    /// Awkward text: quotes, backslashes, control characters, tabs, non-ASCII, emoji, empty.
    static let strings = [
        "", "plain", "a\"b", "back\\slash", "tab\there", "new\nline", "\u{1}\u{1f}", "é ü 字", "🍏", "{}[],:",
    ]

    @Test("Hand-written lines decode with JSONDecoder to exactly the entries they were written from")
    func roundTrip() throws {
        var random = SeededGenerator(seed: 7)
        func text() -> String {
            Self.strings.randomElement(using: &random)! + Self.strings.randomElement(using: &random)!
        }
        let decoder = JSONDecoder()
        for index in 0..<2_000 {
            let url = URL(string: "http://127.0.0.1:1/f\(index)?q=\(index)")!
            var options = DownloadOptions(
                headers: Dictionary(
                    uniqueKeysWithValues: (0..<Int.random(in: 0...3, using: &random)).map {
                        ("H\($0)\(text())", text())
                    }),
                expectedMD5: Bool.random(using: &random) ? String(repeating: "a", count: 32) : nil,
                naming: [nil, .md5OfURL, .suggested, .custom(text())].randomElement(using: &random)!,
                computesChecksum: Bool.random(using: &random),
                priority: [0, 0, 1, -3, Int.max].randomElement(using: &random)!,
                destination: Bool.random(using: &random) ? URL(fileURLWithPath: "/d/\(text())/f \(index)") : nil,
                maximumBytesPerSecond: Bool.random(using: &random) ? Int.random(in: 1...Int.max, using: &random) : nil)
            if Bool.random(using: &random) { options.headers["Authorization"] = "Bearer \(text())" }
            var entry = JournalEntry(
                ReceiptRecord(
                    receipt: DownloadReceipt(
                        url: url, filename: text(), fileURL: URL(fileURLWithPath: "/x/\(index)"),
                        state: DownloadState.allCases.randomElement(using: &random)!,
                        totalBytesExpectedToWrite: Bool.random(using: &random)
                            ? Int64.random(in: 0...Int64.max, using: &random) : nil,
                        checksum: Bool.random(using: &random)
                            ? Checksum(algorithm: .sha1, digest: Array(repeating: 7, count: 20)) : nil,
                        verification: [
                            nil, .lengthOnly, .unverified, .checksum(Checksum(md5: String(repeating: "e", count: 32))!),
                        ]
                        .randomElement(using: &random)!,
                        error: Bool.random(using: &random) ? .httpStatus(503, url: url, retryAfter: 1.5) : nil),
                    options: options, suggestedFilename: Bool.random(using: &random) ? text() : nil))
            if Bool.random(using: &random) {
                entry.placement = JournalEntry.Placement(
                    name: text(), length: Int64.random(in: 0...1 << 40, using: &random),
                    checksum: Bool.random(using: &random) ? Checksum(md5: String(repeating: "a", count: 32)) : nil)
            }
            if Bool.random(using: &random) { entry.interrupted = true }
            if Bool.random(using: &random) { entry.credentialsNotSaved = true }
            if entry.placement != nil, Bool.random(using: &random) { entry.forgetsWhenPlaced = true }
            for line in [JournalLine.put(entry), .remove(url)] {
                let decoded = try decoder.decode(JournalLine.self, from: line.json())
                #expect(decoded == line, "line \(index)")
            }
        }
    }
}
