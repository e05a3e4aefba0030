import Foundation

extension DownloadManager {
    /// Loads the receipts a previous manager saved in `directory` and makes them true again after a crash: temporary
    /// files of interrupted atomic writes go, downloads that were waiting or running come back suspended, and each
    /// unfinished download reports the length its partial file really has.
    /// - Returns: the records, and the error when the receipts file was unreadable (it was moved aside).
    static func recover(directory: DownloadDirectory) -> (records: [ReceiptRecord], error: DownloadError?) {
        AtomicFile.removeOrphans(in: directory.root)
        AtomicFile.removeOrphans(in: directory.downloadingArea)
        let store = ReceiptStore(fileURL: directory.root.appendingPathComponent("receipts.json"))
        var (records, error) = store.load()
        for index in records.indices {
            var receipt = records[index].receipt
            if receipt.state != .completed {
                if receipt.state == .queued || receipt.state == .downloading { receipt.state = .suspended }
                receipt.totalBytesWritten =
                    FileManager.default.sizeOfItem(at: directory.partialFile(for: receipt.url)) ?? 0
            }
            receipt.bytesPerSecond = nil
            receipt.estimatedTimeRemaining = nil
            records[index].receipt = receipt
        }
        return (records, error)
    }
}
