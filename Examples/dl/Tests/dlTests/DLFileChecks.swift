import Downloader
import Foundation
import HTTPTestServer

/// What the `dl` flag tests check about the files a run leaves.
protocol DLFileChecks {}

extension DLFileChecks {
    /// A file's MD5 as hex.
    func md5(_ url: URL) throws -> String {
        MD5.hash(data: try Data(contentsOf: url)).hexString
    }

    /// The MD5 the test server's `/bytes/NAME?size=SIZE` has.
    func content(_ name: String, _ size: Int) -> String {
        TestContent(name: name, size: size).md5.hexString
    }

    /// A folder's entries, sorted (none when it is missing).
    func entries(_ folder: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).sorted()
    }
}
