import Foundation
import Testing

@testable import Downloader

/// `DownloadOptions.merged(into:)`: what a request asks of a download that is kept (suspended, failed, restored).
@Suite("Download options")
struct DownloadOptionsTests {
    @Test("A header asked again in another letter case replaces the kept one: one field, the asked value")
    func headersMergeIgnoringCase() {
        let kept = DownloadOptions(headers: ["User-Agent": "kept/1", "X-Token": "old", "Accept-Language": "fr"])
        let asked = DownloadOptions(headers: ["user-agent": "asked/2", "X-TOKEN": "new", "X-Extra": "1"])
        let merged = asked.merged(into: kept)
        // Two keys for one field went out in the dictionary's order, which the process's hash seed decides.
        #expect(merged.headers == ["user-agent": "asked/2", "X-TOKEN": "new", "Accept-Language": "fr", "X-Extra": "1"])
        #expect(DownloadOptions().merged(into: kept).headers == kept.headers)
        let same = DownloadOptions(headers: ["X-Token": "newer"]).merged(into: kept)
        #expect(same.headers["X-Token"] == "newer" && same.headers.count == 3)
    }
}
