import Dispatch
import Foundation

/// One persisted download: its receipt and the options needed to resume it after a restart.
struct ReceiptRecord: Codable, Sendable, Equatable {
    var receipt: DownloadReceipt
    var options: DownloadOptions
    /// The server's `Content-Disposition` name of the completed file, for renaming it under another naming.
    var suggestedFilename: String?
}

/// Saves receipts as JSON in the manager's directory: atomically (temporary file + rename), on a queue of its own so
/// the actor never waits on the disk. The manager decides how often (it debounces, taking one snapshot per save).
final class ReceiptStore: Sendable {
    private struct FileFormat: Codable {
        var version: Int
        var records: [ReceiptRecord]
    }

    let fileURL: URL
    private let queue = DispatchQueue(label: "Downloader.ReceiptStore")
    private let pending = Locked<(records: [ReceiptRecord]?, scheduled: Bool)>((nil, false))
    /// The last error while saving, if any (a full disk must not stop downloads that are still fine).
    let lastSaveError = Locked<DownloadError?>(nil)

    init(fileURL: URL) {
        self.fileURL = fileURL
    }

    /// Reads the records. A file that cannot be decoded is moved aside (`receipts.json.corrupt-<time>`) and reported.
    /// - Returns: the records (empty when there is no file) and the error if the file was corrupt.
    func load() -> (records: [ReceiptRecord], error: DownloadError?) {
        guard FileManager.default.fileExists(atPath: fileURL.path) else { return ([], nil) }
        do {
            let data = try Data(contentsOf: fileURL)
            return (try JSONDecoder().decode(FileFormat.self, from: data).records, nil)
        } catch {
            let aside = fileURL.appendingPathExtension("corrupt-\(Int(Date().timeIntervalSince1970))")
            try? FileManager.default.moveItem(at: fileURL, to: aside)
            return (
                [],
                .corruptReceipts(
                    fileURL, reason: "the receipts file could not be read and was moved to \(aside.lastPathComponent)",
                    underlying: SavedError(description: "\(error)"))
            )
        }
    }

    /// Saves `records` on the store's queue without waiting; calls made before that save runs share it.
    func scheduleSave(_ records: [ReceiptRecord]) {
        let needsWrite = pending.withLock { state -> Bool in
            state.records = records
            defer { state.scheduled = true }
            return !state.scheduled
        }
        guard needsWrite else { return }
        queue.async { [self] in writePending() }
    }

    /// Saves `records` now and returns when they are on disk.
    func save(_ records: [ReceiptRecord]) async {
        pending.withLock { $0.records = records }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async { [self] in
                writePending()
                continuation.resume()
            }
        }
    }

    private func writePending() {
        let records = pending.withLock { state -> [ReceiptRecord]? in
            defer {
                state.records = nil
                state.scheduled = false
            }
            return state.records
        }
        guard let records else { return }
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            let data = try encoder.encode(FileFormat(version: 1, records: records))
            try AtomicFile.write(data, to: fileURL)
            // Headers (credentials) may be stored: keep the file private.
            try? FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: fileURL.path)
            lastSaveError.withLock { $0 = nil }
        } catch {
            lastSaveError.withLock {
                $0 = .fileSystem(nil, reason: "cannot save \(fileURL.path): \(error.localizedDescription)")
            }
        }
    }
}
