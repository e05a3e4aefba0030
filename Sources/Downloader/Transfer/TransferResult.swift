import Foundation

/// What a finished transfer produced.
struct TransferResult: Sendable {
    /// The verified file in the completed area.
    let fileURL: URL
    /// Its checksum (`nil` when hashing was off).
    let checksum: Checksum?
    /// What was checked about it.
    let verification: Verification
    /// Its length.
    let length: Int64
    /// Bytes that were already on disk when this run started (resumed, not downloaded again).
    let resumedBytes: Int64
    /// Bytes received from the network by this run.
    let receivedBytes: Int64
    /// The server's raw `Content-Disposition` name, if it sent one.
    let suggestedFilename: String?
    /// The most received bytes that waited in memory for the disk at once (to be written or hashed).
    var peakBufferedBytes: Int64 = 0
    /// The most received bytes that waited to be written at once during one response.
    var peakUnwrittenBytes: Int64 = 0
    /// `fileURL`'s file name as the placement chose it (`nil` for a file found in place, not placed).
    var placedName: String?

    /// `fileURL`'s file name.
    var fileName: String { placedName ?? fileURL.fileName }
}
