import Foundation

/// Downloads as APIs and user interfaces show them (`DownloadSnapshot`): by URL, by identifier, a page at a time.
extension DownloadManager {
    /// The snapshot of a URL's download, if the manager knows it.
    public func snapshot(for url: URL) -> DownloadSnapshot? {
        receipt(for: url).map { DownloadSnapshot($0, completedDirectory: directory.completedArea) }
    }

    /// The snapshot of the download whose identifier is `identifier` (`DownloadReceipt.identifier`), if known.
    public func snapshot(identifiedBy identifier: String) -> DownloadSnapshot? {
        receipt(identifiedBy: identifier).map { DownloadSnapshot($0, completedDirectory: directory.completedArea) }
    }

    /// A page of snapshots in the order the downloads were first requested (see `receipts(after:limit:)`).
    /// - Parameters:
    ///   - cursor: `nil` for the first page, else the `next` of the page before.
    ///   - limit: at most this many snapshots (at least 1).
    /// - Returns: the snapshots, and the cursor of the next page (`nil` after the last one).
    public func snapshots(
        after cursor: ReceiptCursor?, limit: Int
    ) -> (snapshots: [DownloadSnapshot], next: ReceiptCursor?) {
        let page = receipts(after: cursor, limit: limit)
        return (page.receipts.map { DownloadSnapshot($0, completedDirectory: directory.completedArea) }, page.next)
    }
}
