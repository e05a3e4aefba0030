import Foundation

/// One line of the receipts journal: a download's record, or its removal.
///
/// A record stores no paths: a completed file is stored by its name in the completed area, a partial file is found by
/// the download's key, so a tampered or planted line cannot point anywhere else.
enum JournalLine: Codable, Sendable, Equatable {
    case put(JournalEntry)
    case remove(URL)

    /// The download the line is about.
    var url: URL {
        switch self {
        case .put(let entry): return entry.url
        case .remove(let url): return url
        }
    }

    private enum CodingKeys: String, CodingKey { case put, remove }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if let entry = try container.decodeIfPresent(JournalEntry.self, forKey: .put) {
            self = .put(entry)
        } else {
            self = .remove(try container.decode(URL.self, forKey: .remove))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .put(let entry): try container.encode(entry, forKey: .put)
        case .remove(let url): try container.encode(url, forKey: .remove)
        }
    }
}

/// What the journal keeps of a download.
struct JournalEntry: Codable, Sendable, Equatable {
    /// A verified file being moved into the completed area under `name`: written before the move, so that a crash
    /// in the middle of it is recognised at the next start.
    struct Placement: Codable, Sendable, Equatable {
        var name: String
        var length: Int64
        var checksum: Checksum?
    }

    var url: URL
    var options: DownloadOptions
    var state: DownloadState
    /// The completed file's name in the completed area.
    var filename: String?
    var totalBytesExpected: Int64?
    var checksum: Checksum?
    var verification: Verification?
    var error: DownloadError?
    var suggestedFilename: String?
    var placement: Placement?
    /// The verified file a download keeps while a newer version of it downloads (its state is then not
    /// `.completed`): it stays the download's until a verified replacement takes its place.
    var replaced: Placement?
    /// Whether the download was asked with credentials that are not saved (a URL user or password, an
    /// `Authorization`, `Cookie` or `Proxy-Authorization` header): after a restart it needs them again.
    var credentialsNotSaved: Bool?
    /// Expected checksums that requests added beside `options.checksum`, the download's own (see
    /// `DownloadManager.StateMachine.Entry.otherExpectations`).
    var otherExpectations: [Checksum]?
    /// Suspended because its process stopped (a shutdown) rather than by a caller; written only when `true`. An entry
    /// left `.queued` or `.downloading` (a crash, `kill -9`) is interrupted as well.
    var interrupted: Bool?
    /// With a placement: the download is forgotten once its file is placed (a batch's, `DownloadManager.download(_:
    /// maximumInFlight:)`), so no removal line follows it; recovery forgets a download whose last line this is once
    /// its verified partial file is gone (moved). Written only when `true`; carried with the placement.
    var forgetsWhenPlaced: Bool?

    /// The expected checksums the download keeps.
    var expectations: KeptExpectations {
        KeptExpectations(own: (try? options.expectation()) ?? nil, others: otherExpectations ?? [])
    }

    /// The entry of a record as it is now.
    /// - Parameters:
    ///   - record: the download's record.
    ///   - expectations: the expected checksums it keeps (they replace the options' own); `nil` keeps the options'
    ///     own.
    init(_ record: ReceiptRecord, expectations: KeptExpectations? = nil) {
        // Field by field from the record: a copy of its receipt first retained every reference it holds (issue #52).
        url = record.receipt.url
        options = record.options
        state = record.receipt.state
        filename = record.receipt.state == .completed ? record.receipt.fileURL.fileName : nil
        totalBytesExpected = record.receipt.totalBytesExpectedToWrite
        checksum = record.receipt.checksum
        verification = record.receipt.verification
        error = record.receipt.error
        suggestedFilename = record.suggestedFilename
        if record.needsCredentials { credentialsNotSaved = true }
        if record.receipt.isInterrupted { interrupted = true }
        keep(expectations)
    }

    /// The entry written just before a verified file is moved to `name`.
    init(
        placing url: URL, options: DownloadOptions, expectations: KeptExpectations? = nil, name: String, length: Int64,
        checksum: Checksum?, suggested: String?, forgetsWhenPlaced: Bool = false
    ) {
        self.url = url
        self.options = options
        state = .downloading
        totalBytesExpected = length
        suggestedFilename = suggested
        placement = Placement(name: name, length: length, checksum: checksum)
        if forgetsWhenPlaced { self.forgetsWhenPlaced = true }
        keep(expectations)
    }

    /// Headers whose values are secrets: never written to disk.
    static let secretHeaders: Set<String> = ["authorization", "cookie", "proxy-authorization"]

    /// The entry without what must never reach the disk (an entry an earlier version saved, for rewriting).
    func withoutSecrets() -> JournalEntry {
        var entry = self
        entry.dropSecrets()
        return entry
    }

    /// Whether it holds something that must never reach the disk.
    var holdsSecrets: Bool {
        url.hasCredentials || (error?.url?.hasCredentials ?? false)
            || options.carriesSecretHeader
    }

    /// Drops what must never reach the disk: the URL's credentials and secret headers (noting that there were some),
    /// and the credentials in a saved error's URL.
    private mutating func dropSecrets() {
        let secret = options.headers.keys.filter { Self.secretHeaders.contains($0.lowercased()) }
        if url.hasCredentials || !secret.isEmpty || credentialsNotSaved == true { credentialsNotSaved = true }
        url = url.withoutCredentials
        if options.mirrors.contains(where: \.hasCredentials) {
            credentialsNotSaved = true
            options.mirrors = options.mirrors.map(\.withoutCredentials)
        }
        for name in secret { options.headers[name] = nil }
        error = error?.withoutCredentials
    }

    private mutating func keep(_ expectations: KeptExpectations?) {
        dropSecrets()
        guard let expectations else { return }
        options.checksum = expectations.own
        options.expectedMD5 = nil
        otherExpectations = expectations.others.isEmpty ? nil : expectations.others
    }
}

extension DownloadOptions {
    /// Whether a header holds a secret (`JournalEntry.secretHeaders`, any case): such values never reach the disk.
    var carriesSecretHeader: Bool {
        headers.keys.contains { JournalEntry.secretHeaders.contains($0.lowercased()) }
    }
}

/// One download as the manager keeps it: its receipt and the options needed to resume it after a restart.
struct ReceiptRecord: Sendable, Equatable {
    var receipt: DownloadReceipt
    var options: DownloadOptions
    /// The server's `Content-Disposition` name of the completed file, for renaming it under another naming.
    var suggestedFilename: String?
    /// The expected checksums as saved, its own first: read at start; while the manager runs, its state machine
    /// keeps them.
    var savedExpectations = KeptExpectations.none
    /// Read at start: the receipt's file is a verified file that a newer version, not finished, replaces once verified.
    var replacesCompletedFile = false
    /// It was asked with credentials (a URL user or password, a secret header), which are never saved: after a
    /// restart it needs them again.
    var needsCredentials = false
    /// `receipt.identifier` (the stem of its partial file) when the record was made here, so that its transfers do
    /// not hash the URL again (3,800 instructions a download; issue #52); `nil` for a record read from the journal.
    /// Not saved.
    var identifier: String?
}

/// The expected checksums a download keeps, saved with it: its own (what its transfers verify), and the others that
/// requests added beside it (compared with the completed file; see `DownloadManager.StateMachine.Entry`).
struct KeptExpectations: Sendable, Equatable {
    var own: Checksum?
    var others: [Checksum] = []

    static let none = KeptExpectations()

    /// Every one of them, its own first.
    var all: [Checksum] { (own.map { [$0] } ?? []) + others }
}
