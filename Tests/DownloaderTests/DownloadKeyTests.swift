import Foundation
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
}
