import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The layout before the state folder: `receipts.json` at the directory's root and partial files in `downloading/`
/// (`KEY.part`, `KEY.part.json`). A manager opening such a directory takes it over: the receipts become journal
/// entries, the partial files move into the state folder, and the old files are deleted.
///
/// Only a `receipts.json` that decodes as that format is taken over: any other file of that name is a download
/// (`dl` used to keep both in one folder) and is left alone.
enum LegacyState {
    private struct FileFormat: Decodable {
        var version: Int
        var records: [Record]
    }

    private struct Record: Decodable {
        var receipt: DownloadReceipt
        var options: DownloadOptions
    }

    /// Takes over an old layout, if there is one.
    /// - Returns: the entries to start the journal with (empty when there was nothing to take over), and what could
    ///   not be taken over.
    static func migrate(_ directory: DownloadDirectory) -> (entries: [JournalEntry], problems: [String]) {
        let receipts = directory.root.appendingPathComponent("receipts.json")
        // Only a regular file and a real folder are taken over: links could bring someone else's files in.
        guard isRegularFile(receipts), let data = try? Data(contentsOf: receipts),
            let old = try? JSONDecoder().decode(FileFormat.self, from: data), old.version == 1
        else { return ([], []) }
        var entries: [JournalEntry] = []
        var problems: [String] = []
        for record in old.records {
            var receipt = record.receipt
            if receipt.state == .completed {
                let name = receipt.fileURL.lastPathComponent
                guard
                    receipt.fileURL.deletingLastPathComponent().standardizedFileURL
                        == directory.completedArea.standardizedFileURL,
                    let file = directory.completedFile(named: name)
                else {
                    problems.append(
                        "\(receipt.url.redactedAbsoluteString): its file \(receipt.fileURL.path) is outside \(directory.completedArea.path)"
                    )
                    continue
                }
                receipt.fileURL = file
            }
            entries.append(
                JournalEntry(
                    ReceiptRecord(receipt: receipt, options: record.options),
                    expectations: KeptExpectations(own: (try? record.options.expectation()) ?? nil)))
        }
        // The partial files and their saved state move into the state folder.
        let downloading = directory.root.appendingPathComponent("downloading", isDirectory: true)
        var info = stat()
        let isFolder = lstat(downloading.path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
        let names = isFolder ? (try? FileManager.default.contentsOfDirectory(atPath: downloading.path)) ?? [] : []
        for name in names {
            let source = downloading.appendingPathComponent(name)
            let target: String
            if name.hasSuffix(".part.json") {
                target = String(name.dropLast(10)) + ".state"
            } else if name.hasSuffix(".part") {
                target = name
            } else {
                continue
            }
            guard isRegularFile(source), DownloadDirectory.key(ofPartialName: target) != nil else { continue }
            if directory.state.moveIn(from: source, to: target, in: .partial) != 0 {
                problems.append("cannot move \(source.path)")
            }
        }
        if isFolder { AtomicFile.removeOrphans(in: downloading) }
        try? FileManager.default.removeItem(at: receipts)
        if isFolder { rmdir(downloading.path) }  // only when empty
        return (entries, problems)
    }

    /// Whether a path is a regular file itself (not a link to one).
    private static func isRegularFile(_ url: URL) -> Bool {
        var info = stat()
        return lstat(url.path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
    }
}
