import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// A download's key in the manager's tables: equal exactly when the URLs are, whichever instance made it.
@Suite("DownloadKey")
struct DownloadKeyTests {
    @Test("Keys of equal URLs made apart are equal and find each other; keys of other URLs do not")
    func equalityFollowsTheURL() throws {
        let texts = [
            "http://127.0.0.1:8080/a", "http://127.0.0.1:8080/a?x=1", "http://127.0.0.1:8080/a#f",
            "https://127.0.0.1:8080/a", "http://127.0.0.1:8081/a", "http://example.com/%C3%A9",
            "http://EXAMPLE.com/%C3%A9",
        ]
        var table: [DownloadKey: Int] = [:]
        for (index, text) in texts.enumerated() {
            let url = try #require(URL(string: text))
            table[DownloadKey(url)] = index
        }
        for (index, text) in texts.enumerated() {
            // A URL made again from the same text: another instance, the same key.
            let again = try #require(URL(string: text))
            #expect(table[DownloadKey(again)] == index, "\(text)")
            #expect(DownloadKey(again) == DownloadKey(try #require(URL(string: text))))
            #expect((DownloadKey(again) == DownloadKey(again)) == (again == again))
        }
        for first in texts.indices {
            for second in texts.indices where first != second {
                let lhs = try #require(URL(string: texts[first]))
                let rhs = try #require(URL(string: texts[second]))
                #expect((DownloadKey(lhs) == DownloadKey(rhs)) == (lhs == rhs), "\(texts[first]) \(texts[second])")
            }
        }
        #expect(DownloadKey(try #require(URL(string: texts[0]))).description == texts[0])
    }

    @Test("The value tables place keys by: equal for equal keys, spread like random numbers, moved by each seed")
    func rawHashValues() throws {
        let count = 4096
        let keys = try (0..<count).map { DownloadKey(try #require(URL(string: "http://127.0.0.1:1/f/\($0).bin"))) }
        var random = SeededGenerator(seed: 52)
        for _ in 0..<64 {
            let seed = Int(truncatingIfNeeded: random.next())
            let index = Int(random.next() % UInt64(count))
            let again = DownloadKey(try #require(URL(string: "http://127.0.0.1:1/f/\(index).bin")))
            #expect(again._rawHashValue(seed: seed) == keys[index]._rawHashValue(seed: seed))
        }
        // In a table of as many buckets as keys, random placement fills 1 − 1/e of them (2,589 of 4,096).
        let mask = count - 1
        for seed in [0, 1, -1, 0x5eed] {
            let used = Set(keys.map { $0._rawHashValue(seed: seed) & mask }).count
            #expect((2_450...2_730).contains(used), "seed \(seed): \(used) buckets of \(count)")
        }
        // Two seeds place keys independently: a key's bucket under one tells nothing of its bucket under the other
        // (a seed only XORed in would move every key by the same distance, and keep the clusters of one table in the
        // next: the quadratic copy `Dictionary`'s per-table seeds exist to avoid).
        var moves: [Int: Int] = [:]
        for key in keys { moves[(key._rawHashValue(seed: 1) ^ key._rawHashValue(seed: 2)) & mask, default: 0] += 1 }
        #expect(moves.values.max()! < 16, "\(moves.values.max()!) keys moved alike between two seeds")
        // Tables of keys work as tables: every key found, every value its own.
        var table: [DownloadKey: Int] = [:]
        for (index, key) in keys.enumerated() { table[key] = index }
        #expect(table.count == count && keys.indices.allSatisfy { table[keys[$0]] == $0 })
    }
}
