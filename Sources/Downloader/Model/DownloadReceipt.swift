import Foundation

/// Everything known about one download; the URL is its identity.
public struct DownloadReceipt: Sendable, Codable, Hashable, Identifiable {
    /// The URL, which identifies the download.
    public var url: URL
    /// The file name: before the file is complete, `md5(url)` plus the URL's extension (the partial file's key, not
    /// the name it will get); once completed, the final file's name (the server's or the URL's, see `FileNaming`).
    public var filename: String {
        get { file.name }
        set { file = ReceiptFile(url: file.url, name: newValue) }
    }
    /// The partial file while incomplete, the final file once completed.
    public var fileURL: URL {
        get { file.url }
        set { file = ReceiptFile(url: newValue, name: file.name) }
    }
    /// `fileURL` and `filename`, stored together: a new download's are made only when read (`ReceiptFile`).
    var file: ReceiptFile
    /// Where the download is in its life.
    public var state: DownloadState
    /// Bytes on disk.
    public var totalBytesWritten: Int64
    /// The file's size, `nil` while unknown.
    public var totalBytesExpectedToWrite: Int64?
    /// The completed file's checksum, when it was hashed.
    public internal(set) var checksum: Checksum?
    /// What was checked about the completed file: a checksum compared with an expectation or a server's digest, a
    /// checksum with nothing to compare, or only the length. `nil` until completed.
    public internal(set) var verification: Verification?
    /// The checksum the download was asked to have (`DownloadOptions.checksum` of the request that gave it first),
    /// kept across restarts: what its transfers verify. `nil` when none was asked (a server's digest or MD5 is then
    /// the file's own checksum, in `checksum`).
    public internal(set) var expectedChecksum: Checksum?
    /// Why it failed, when it failed.
    public var error: DownloadError?
    /// Smoothed download speed of this session in bytes per second (resumed bytes do not count); `nil` when not
    /// downloading. Not persisted.
    public var bytesPerSecond: Double?
    /// Requests of this download in flight now — its connections: the HEAD of a resume, a Range window, each segment
    /// of a download over several connections (including one waiting for its host's turn); 0 when not downloading.
    /// Updated with the progress. Not persisted.
    public var activeConnections = 0
    /// Estimated seconds until completion at the current speed; `nil` when unknown. Not persisted.
    public var estimatedTimeRemaining: TimeInterval?
    /// Whether a suspended download was stopped by its process rather than by a caller: a `shutdown()`, a signal
    /// that ended the program, a crash or `kill -9` while it waited or ran. `false` for a download that `suspend`
    /// paused, which stays paused. Interrupted downloads continue on start with
    /// `Configuration.continuesInterruptedDownloads`, or when `DownloadManager.resumeInterrupted()` is called.
    public internal(set) var isInterrupted = false

    public var id: URL { url }

    /// A stable name of the download: 32 lowercase hex digits (the MD5 of its URL without credentials), the same in
    /// every process and after a restart, safe in a URL path and a file name. Find the download again with
    /// `DownloadManager.receipt(identifiedBy:)`.
    public var identifier: String { url.downloadIdentifier }

    /// The file's MD5 as 32 lowercase hex digits, when it was hashed with MD5.
    public var md5: String? { checksum?.algorithm == .md5 ? checksum?.hexString : nil }

    private enum CodingKeys: String, CodingKey {
        case url, filename, fileURL, state, totalBytesWritten, totalBytesExpectedToWrite, checksum, verification, md5
        case error, identifier, isInterrupted, expectedChecksum
    }

    /// Creates a receipt.
    public init(
        url: URL, filename: String, fileURL: URL, state: DownloadState = .idle, totalBytesWritten: Int64 = 0,
        totalBytesExpectedToWrite: Int64? = nil, checksum: Checksum? = nil, verification: Verification? = nil,
        error: DownloadError? = nil
    ) {
        self.init(
            url: url, file: ReceiptFile(url: fileURL, name: filename), state: state,
            totalBytesWritten: totalBytesWritten, totalBytesExpectedToWrite: totalBytesExpectedToWrite,
            checksum: checksum, verification: verification, error: error)
    }

    /// Creates a receipt whose file is `file` (a new download's partial file, made when read).
    init(
        url: URL, file: ReceiptFile, state: DownloadState = .idle, totalBytesWritten: Int64 = 0,
        totalBytesExpectedToWrite: Int64? = nil, checksum: Checksum? = nil, verification: Verification? = nil,
        error: DownloadError? = nil
    ) {
        self.url = url
        self.file = file
        self.state = state
        self.totalBytesWritten = totalBytesWritten
        self.totalBytesExpectedToWrite = totalBytesExpectedToWrite
        self.checksum = checksum
        self.verification = verification
        self.error = error
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        url = try container.decode(URL.self, forKey: .url)
        let filename = try container.decode(String.self, forKey: .filename)
        file = ReceiptFile(url: try container.decode(URL.self, forKey: .fileURL), name: filename)
        state = try container.decode(DownloadState.self, forKey: .state)
        totalBytesWritten = try container.decode(Int64.self, forKey: .totalBytesWritten)
        totalBytesExpectedToWrite = try container.decodeIfPresent(Int64.self, forKey: .totalBytesExpectedToWrite)
        // Receipts of earlier versions kept an `md5` only.
        checksum =
            try container.decodeIfPresent(Checksum.self, forKey: .checksum)
            ?? container.decodeIfPresent(String.self, forKey: .md5).flatMap { Checksum(md5: $0) }
        verification = try container.decodeIfPresent(Verification.self, forKey: .verification)
        error = try container.decodeIfPresent(DownloadError.self, forKey: .error)
        isInterrupted = try container.decodeIfPresent(Bool.self, forKey: .isInterrupted) ?? false
        expectedChecksum = try container.decodeIfPresent(Checksum.self, forKey: .expectedChecksum)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(url, forKey: .url)
        try container.encode(filename, forKey: .filename)
        try container.encode(fileURL, forKey: .fileURL)
        try container.encode(state, forKey: .state)
        try container.encode(totalBytesWritten, forKey: .totalBytesWritten)
        try container.encodeIfPresent(totalBytesExpectedToWrite, forKey: .totalBytesExpectedToWrite)
        try container.encodeIfPresent(checksum, forKey: .checksum)
        try container.encodeIfPresent(verification, forKey: .verification)
        try container.encodeIfPresent(error, forKey: .error)
        try container.encode(identifier, forKey: .identifier)
        if isInterrupted { try container.encode(true, forKey: .isInterrupted) }
        try container.encodeIfPresent(expectedChecksum, forKey: .expectedChecksum)
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
