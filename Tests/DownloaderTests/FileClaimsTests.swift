import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

@Suite("File claims")
struct FileClaimsTests {
    @Test("A claim's key is the standardised path, with or without the shortcut (seeded paths)")
    func standardizedPath() {
        var random = SeededGenerator(seed: 52)
        let components = ["a", ".", "..", "", "...", ".a", "b.", "%41", "é", "a b", "x.part", "~"]
        var shortcuts = 0
        for _ in 0..<5_000 {
            let count = Int.random(in: 1...6, using: &random)
            let path =
                (Int.random(in: 0..<10, using: &random) == 0 ? "" : "/")
                + (0..<count).map { _ in components.randomElement(using: &random)! }.joined(separator: "/")
                + (Bool.random(using: &random) ? "/" : "")
            let file = URL(fileURLWithPath: path)
            let expected = file.standardizedFileURL.path
            #expect(FileClaims.standardizedPath(of: file) == expected, "\(path.debugDescription)")
            if file.path == expected { shortcuts += 1 }
        }
        #expect(shortcuts > 100)  // the shortcut was taken, not only the slow path
    }
}
