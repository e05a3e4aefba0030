import Foundation

/// A download given a fresh URL — a signed link that expired, a moved mirror — keeps its identity and its bytes.
extension DownloadManager {
    /// Gives a download a new URL to fetch from (a fresh signed link after the old one expired, say), keeping what
    /// it has.
    ///
    /// The download keeps its identity (`url`, its identifier, receipt and file name); `newURL` becomes its first
    /// mirror (`DownloadOptions.mirrors`), saved with it, so that every later request — after a restart too — goes
    /// there once `url` itself fails. Its partial file and hash state continue only as a mirror's do: when the new
    /// URL proves the same version (the same length and validators, asked with `If-Range`), or, with an expected
    /// checksum, when the bytes before the resume point compare equal and the checksum holds at the end; otherwise
    /// it starts again from byte 0. A failed download is resumed; a running one switches at once (its waiters keep
    /// waiting); a suspended one stays suspended until `resume(_:)`; a completed one is not changed.
    /// - Parameters:
    ///   - url: the download (its identity).
    ///   - newURL: where to fetch it from now; an http(s) URL. Its credentials, if any, are kept in memory only.
    /// - Returns: the receipt, `nil` when no download has that URL or it is completed.
    /// - Throws: `DownloadError.invalidURL` or `.unsupportedScheme` for a `newURL` that cannot be downloaded.
    @discardableResult
    public func changeURL(of url: URL, to newURL: URL) throws(DownloadError) -> DownloadReceipt? {
        let key = DownloadKey(url.withoutCredentials)
        try newURL.validateForDownload()
        guard var record = book[key], let state = machine.state(of: key), state != .completed else { return nil }
        guard newURL.withoutCredentials != key.url else { return record.receipt }
        record.options.mirrors.removeAll { $0.withoutCredentials == newURL.withoutCredentials }
        record.options.mirrors.insert(newURL, at: 0)
        book[key] = record
        persist(key)
        switch state {
        case .failed:
            apply(machine.resume(key))
        case .downloading:
            // A new transfer reads the new mirrors: this one stops, and the next one starts when it has.
            apply(machine.suspend(key))
            apply(machine.resume(key))
        case .queued, .suspended, .idle, .completed:
            break
        }
        return book[key]?.receipt
    }

    /// The unfinished download of the same file under another link: a link signed again (`?X-Amz-Signature=…`) has the
    /// scheme, host and path of the one that expired and another query, and its file takes the same name in the
    /// completed area. Give it the new link with `changeURL(of:to:)`: its bytes are kept only when the server proves
    /// the same version.
    /// - Parameter url: the new link.
    /// - Returns: the most recently requested such download without a destination of its own; `nil` when none, or
    ///   when `url` is a download itself.
    public func unfinishedDownload(sameFileAs url: URL) -> DownloadReceipt? {
        let key = DownloadKey(url.withoutCredentials)
        guard book[key] == nil, let wanted = Self.fileIdentity(of: key.url) else { return nil }
        for record in book.all.reversed() where record.options.destination == nil {
            let other = record.receipt.url
            guard other != key.url, Self.fileIdentity(of: other) == wanted, record.receipt.state != .completed,
                machine.completedFile(of: DownloadKey(other)) == nil
            else { continue }
            return record.receipt
        }
        return nil
    }

    /// A URL without its query and fragment: what two links to one file signed at different times share.
    private static func fileIdentity(of url: URL) -> String? {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false), components.host != nil else {
            return nil
        }
        components.query = nil
        components.fragment = nil
        components.scheme = components.scheme?.lowercased()
        components.host = components.host?.lowercased()
        return components.url?.absoluteString
    }

    /// The unfinished download whose verified file goes to `destination` (its `DownloadOptions.destination`), if any:
    /// for a program that names the file it wants and may be given a new URL for it (see `changeURL(of:to:)`).
    /// - Parameter destination: a file URL.
    /// - Returns: its receipt; `nil` when none, or when that download is completed.
    public func unfinishedDownload(writingTo destination: URL) -> DownloadReceipt? {
        let target = destination.standardizedFileURL
        for record in book.all where record.options.destination?.standardizedFileURL == target {
            guard record.receipt.state != .completed, machine.completedFile(of: DownloadKey(record.receipt.url)) == nil
            else {
                continue
            }
            return record.receipt
        }
        return nil
    }
}
