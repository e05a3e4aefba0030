import Foundation
import Testing

@testable import Downloader

@Suite("Dictionary.modifyValue")
struct DictionaryModifyValueTests {
    final class Box {
        var count = 0
    }

    @Test("Changes the stored value in place, and does nothing for a missing key")
    func inPlace() {
        var values: [Int: Box] = [1: Box()]
        // In place: the body holds the only reference (a copy out and back would hold a second one).
        let unique = values.modifyValue(forKey: 1) { box -> Bool in
            box.count += 1
            return isKnownUniquelyReferenced(&box)
        }
        #expect(unique == true)
        #expect(values[1]?.count == 1)
        var ran = false
        #expect(values.modifyValue(forKey: 2) { _ in ran = true } == nil)
        #expect(!ran && values.count == 1)
    }
}
