import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

extension TransferTests {
    @Test("A disk slower than the network holds at most one and a half windows in memory")
    func memoryBoundedBySlowDisk() async throws {
        // URLSession on Linux has no backpressure: a request's whole body arrives as fast as the network allows. The
        // bound comes from the windows: the next request starts only once the disk is past the middle of this one.
        // The disk is made slow by its progress callback, which runs on the disk queue and sleeps for each byte
        // written (about 40 MB/s, against a loopback network many times faster).
        let window: Int64 = 512 << 10
        let size = 8 << 20
        let content = TestContent(name: "slowdisk", size: size)
        let last = Downloader.Locked<Int64>(0)
        let transfer = Transfer(
            url: server.url("/bytes/slowdisk?size=\(size)"), options: DownloadOptions(), directory: directory,
            bridge: bridge, configuration: .init(windowSize: window, firstWindowSize: 64 << 10),
            progress: { written, _ in
                let delta = last.withLock { last in
                    defer { last = written }
                    return written - last
                }
                usleep(UInt32(max(0, delta) / 40))  // a slow disk, not synchronisation
            })
        let result = try await transfer.run()
        #expect(result.md5 == content.md5)
        #expect(
            result.peakBufferedBytes <= window * 3 / 2 + (64 << 10),
            "bytes waited for the disk beyond the bound of 1.5 windows")
        // The disk really was the slower side (otherwise the bound above proves nothing).
        #expect(result.peakBufferedBytes >= window / 2)
    }
}
