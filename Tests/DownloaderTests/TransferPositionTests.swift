import Foundation
import Testing

@testable import Downloader

/// The network side of a transfer (`TransferPosition`): what it keeps in memory while a body streams.
@Suite("Transfer position")
struct TransferPositionTests {
    @Test("A body without a strong ETag keeps only the bytes a continuity check needs, in a buffer of their own")
    func recentBytesStayBounded() {
        // Chaos trial 18 of seed 1 (CI, stop 60): a 96 MiB file whose ETags flapped peaked at 113 MB where the bound is
        // 96 MB; without an ETag a 128 MiB file peaked at 127 MB against 40 MB with one. `recentBytes` was trimmed to
        // a `suffix`, a slice that keeps (and appends to) the whole buffer it came from: the body stayed in memory.
        // A slice starts where its bytes sat in that buffer; bytes of their own start at 0.
        var position = TransferPosition(keptLength: 64 << 10)
        position.keepsRecentBytes = true
        var last = Data()
        for index in 0..<256 {
            last = Data(repeating: UInt8(truncatingIfNeeded: index), count: 16 << 10)
            position.accept(last)
            #expect(position.recentBytes.count <= 2 * position.keptLength)
        }
        #expect(position.offset == 256 * (16 << 10))
        #expect(position.recentBytes.startIndex == 0, "recentBytes is a slice of a larger buffer")
        #expect(position.lastBytes(16 << 10) == last)
        #expect(position.lastBytes(64 << 10)?.count == 64 << 10)
    }
}
