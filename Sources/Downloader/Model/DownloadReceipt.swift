import Foundation

/// Everything known about one download; the URL is its identity.
public struct DownloadReceipt: Sendable, Codable, Hashable, Identifiable {
    /// The URL, which identifies the download.
    public var url: URL
    /// The file name: `md5(url)` plus the URL's extension by default; once completed, the final file's name.
    public var filename: String
    /// The partial file while incomplete, the final file once completed.
    public var fileURL: URL
    /// Where the download is in its life.
    public var state: DownloadState
    /// Bytes on disk.
    public var totalBytesWritten: Int64
    /// The file's size, `nil` while unknown.
    public var totalBytesExpectedToWrite: Int64?
    /// The MD5 of the file as 32 lowercase hex digits, once completed.
    public internal(set) var md5: String?
    /// Why it failed, when it failed.
    public var error: DownloadError?
    /// Smoothed download speed of this session in bytes per second (resumed bytes do not count); `nil` when not
    /// downloading. Not persisted.
    public var bytesPerSecond: Double?
    /// Estimated seconds until completion at the current speed; `nil` when unknown. Not persisted.
    public var estimatedTimeRemaining: TimeInterval?

    public var id: URL { url }

    /// The completed file's checksum, when it was hashed.
    public var checksum: Checksum? { md5.flatMap { Checksum(md5: $0) } }

    private enum CodingKeys: String, CodingKey {
        case url, filename, fileURL, state, totalBytesWritten, totalBytesExpectedToWrite, md5, error
    }

    /// Creates a receipt.
    public init(
        url: URL, filename: String, fileURL: URL, state: DownloadState = .idle, totalBytesWritten: Int64 = 0,
        totalBytesExpectedToWrite: Int64? = nil, md5: String? = nil, error: DownloadError? = nil
    ) {
        self.url = url
        self.filename = filename
        self.fileURL = fileURL
        self.state = state
        self.totalBytesWritten = totalBytesWritten
        self.totalBytesExpectedToWrite = totalBytesExpectedToWrite
        self.md5 = md5
        self.error = error
    }

    /// From 0 to 1; 0 while the size is unknown (1 once completed).
    public var fractionCompleted: Double {
        if state == .completed { return 1 }
        guard let total = totalBytesExpectedToWrite, total > 0 else { return 0 }
        return min(1, Double(totalBytesWritten) / Double(total))
    }

    /// A Foundation `Progress` built from the two byte counts (indeterminate while the size is unknown).
    public var progress: Progress {
        let progress = Progress(totalUnitCount: totalBytesExpectedToWrite ?? -1)
        progress.kind = .file
        progress.completedUnitCount = totalBytesWritten
        if let bytesPerSecond {
            progress.setUserInfoObject(NSNumber(value: Int(bytesPerSecond)), forKey: .throughputKey)
        }
        if let estimatedTimeRemaining {
            progress.setUserInfoObject(NSNumber(value: estimatedTimeRemaining), forKey: .estimatedTimeRemainingKey)
        }
        return progress
    }
}

extension DownloadReceipt: CustomStringConvertible {
    /// The URL (credentials hidden), state, bytes and file: safe to log.
    public var description: String {
        let total = totalBytesExpectedToWrite.map(String.init) ?? "?"
        return
            "DownloadReceipt(\(url.redactedAbsoluteString), \(state), \(totalBytesWritten)/\(total) bytes, \(fileURL.path))"
    }
}
