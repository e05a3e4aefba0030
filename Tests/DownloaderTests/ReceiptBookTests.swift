import Foundation
import Testing

@testable import Downloader

@Suite("ReceiptBook")
struct ReceiptBookTests {
    static func record(_ index: Int) -> ReceiptRecord {
        let url = URL(string: "http://example.com/\(index)")!
        return ReceiptRecord(
            receipt: DownloadReceipt(url: url, filename: "\(index)", fileURL: URL(fileURLWithPath: "/x/\(index)")),
            options: DownloadOptions())
    }

    /// Every page after `cursor` to the end, as the book's keys.
    static func pages(_ book: ReceiptBook<Int>, limit: Int, after cursor: Int? = nil) -> [[Int]] {
        var pages: [[Int]] = []
        var cursor = cursor
        repeat {
            let (records, next) = book.page(after: cursor, limit: limit)
            pages.append(records.map { Int($0.receipt.filename)! })
            cursor = next
        } while cursor != nil
        return pages
    }

    @Test("Pages cover every record once, in request order, and end with no cursor")
    func pagesInOrder() {
        var book = ReceiptBook<Int>()
        for index in 0..<25 { book[index] = Self.record(index) }
        #expect(Self.pages(book, limit: 10) == [Array(0..<10), Array(10..<20), Array(20..<25)])
        #expect(Self.pages(book, limit: 25) == [Array(0..<25)])
        #expect(ReceiptBook<Int>().page(after: nil, limit: 5).records.isEmpty)
        #expect(ReceiptBook<Int>().page(after: nil, limit: 5).next == nil)
    }

    @Test("A cursor survives removals and the compaction they cause; records added later come on later pages")
    func cursorSurvivesCompaction() {
        var book = ReceiptBook<Int>()
        for index in 0..<200 { book[index] = Self.record(index) }
        let (first, cursor) = book.page(after: nil, limit: 50)
        #expect(first.count == 50)
        // Remove most of them: the book compacts its order (places are renumbered, serials are not).
        for index in 0..<200 where index % 5 != 0 { book[index] = nil }
        book[200] = Self.record(200)
        let rest = Self.pages(book, limit: 7, after: cursor).flatMap { $0 }
        #expect(rest == Array(stride(from: 50, to: 200, by: 5)) + [200])
    }

    @Test("Seeded random inserts, removals and pages: every page is the model's next slice; identifiers find keys")
    func seededPaging() {
        for seed in UInt64(1)...50 {
            var random = SplitMix(seed: seed)
            var book = ReceiptBook<Int>(identify: { "id\($0)" })
            var model: [Int] = []  // live keys in insertion order
            var next = 0
            // The identifier index is built by the first look-up, at a random step (or only at the end), and kept
            // through the inserts and removals after it.
            let firstLookUp = Int(random.next() % 400)
            for step in 0..<300 {
                if step == firstLookUp { _ = book.key(identifiedBy: "id0") }
                switch random.next() % 3 {
                case 0, 1:
                    book[next] = Self.record(next)
                    model.append(next)
                    next += 1
                default:
                    guard !model.isEmpty else { continue }
                    let key = model.remove(at: Int(random.next() % UInt64(model.count)))
                    book[key] = nil
                }
            }
            let limit = Int(random.next() % 9) + 1
            #expect(Self.pages(book, limit: limit).flatMap { $0 } == model, "seed \(seed)")
            // Every live key by its identifier, and no removed one.
            #expect((0..<next).filter { book.key(identifiedBy: "id\($0)") != nil } == model.sorted(), "seed \(seed)")
        }
    }
}

/// splitmix64, for reproducible sequences.
private struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
