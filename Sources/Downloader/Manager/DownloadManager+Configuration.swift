import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension DownloadManager {
    /// How a manager behaves. Every property but `directory` has a default.
    public struct Configuration: Sendable {
        /// The manager's directory: it holds the state folder (`.downloader/`) and the `completed/` area (whole,
        /// verified files only), unless `stateDirectory` or `completedDirectory` put them elsewhere. One manager owns
        /// it at a time (see `directoryLockTimeout`).
        public var directory: URL
        /// How many downloads transfer at once; the rest wait as `.queued`. Default 4.
        public var maximumActiveDownloads: Int
        /// Which waiting download starts next. Default `.fifo`.
        public var prioritization: DownloadPrioritization
        /// How many times a transient fault (lost connection, stall, 408, 429, 5xx) is retried, each time resuming by
        /// Range, before the download fails. Default 5.
        public var retryLimit: Int
        /// The first retry waits about this long (seconds); each further retry doubles it, with jitter, up to
        /// `maximumRetryDelay`. A server's `Retry-After` wins. Default 1.
        public var retryBaseDelay: TimeInterval
        /// The longest wait between retries without `Retry-After` (seconds). Default 60.
        public var maximumRetryDelay: TimeInterval
        /// A request that receives no byte for this long is closed and retried (seconds). Default 30. Time the process
        /// did not run (stopped by SIGSTOP or Ctrl-Z, frozen by a stalled machine) does not count.
        public var stallTimeout: TimeInterval
        /// A request that receives less than this many bytes per second, measured over `lowestSpeedInterval`, is
        /// closed and retried like a stall (a body that trickles a byte every few seconds never trips
        /// `stallTimeout`). Default `nil`: no lowest speed.
        public var lowestSpeedLimit: Int?
        /// The most bytes per second all downloads together receive, on average. Kept by pacing Range windows (see
        /// `DownloadOptions.maximumBytesPerSecond`). Default `nil`: no limit.
        public var maximumBytesPerSecond: Int?
        /// The `User-Agent` of every request, unless a download's `DownloadOptions.headers` set one. Default
        /// `Downloader/1.0.0` (`DownloadManager.version`).
        public var userAgent: String
        /// Called before every request of every download — the HEAD of a resume, each Range window, each segment,
        /// each retry — with the request as it would go out; what it returns goes out instead. Use it for a bearer
        /// token that expires mid-download, or a URL that must be signed again. Keep the `Range`, `If-Range` and
        /// `Accept-Encoding` headers: the download depends on them. A throw fails that download at once with
        /// `DownloadError.requestPreparationFailed` (a thrown `DownloadError` as it is), and nothing is retried.
        /// Default `nil`.
        public var prepareRequest: (@Sendable (URLRequest) async throws -> URLRequest)?
        /// User names and passwords for servers that answer `401` with a Basic challenge, by origin, host and port, or
        /// host: `"https://example.com:8443"` (that scheme, host and port only: what curl does with a login given with
        /// a URL), `"example.com:8443"`, or `"example.com"` (any port and scheme of that host, as `.netrc` names
        /// machines); the most specific wins. A request goes out without them; a `401` offering `Basic` is answered
        /// once, and later requests to that origin carry the credential from the start. Never sent where its key does
        /// not match (a redirect to another origin gets that origin's own credential, if any), never written to disk. A URL's own `user:password@` and an `Authorization` header in `DownloadOptions.headers`
        /// are used as they are. See `DownloadCredential`. Default empty.
        public var credentials: [String: DownloadCredential]
        /// The interval over which `lowestSpeedLimit` is measured, in seconds (aria2 uses 30). Default 30.
        public var lowestSpeedInterval: TimeInterval
        /// Connections per download when its options do not say (`DownloadOptions.connections`), 1...16. Default 1.
        public var connectionsPerDownload: Int
        /// The most requests in flight to one host (scheme, name and port) over all downloads, at least 1 (curl's
        /// `--parallel-max-host`); the rest wait for a turn, the oldest download's first. Default `nil`: no cap.
        ///
        /// Whatever the cap, a host that answers `503` or `429` while others to it are in flight is taken to mean
        /// "too many" (nginx `limit_conn`, a CDN's per-client limit): that host gets as many as it was serving, the
        /// refused request waits for a turn (and the `Retry-After`, up to 60 s) without spending its download's
        /// retries, and every 10 s without a refusal the host gets one more, up to the number it refused.
        public var maximumConnectionsPerHost: Int?
        /// Called with a `DownloadLogRecord` for what the manager decides or notices — state changes, retries and
        /// their reasons, warnings (a mirror taken, a restart from byte 0 and why, bytes on disk not trusted, a
        /// conflicting request), a response ended early because the disk fell behind (`info`), removals, a journal
        /// that cannot be saved — on the manager's actor, in order: keep it quick (a logger's `log` call). Progress
        /// is not logged. Default `nil`.
        public var log: (@Sendable (DownloadLogRecord) -> Void)?
        /// Bytes per Range request; memory use is bounded by about one and a half windows per active download.
        /// Default 8 MiB: each window of a download that is hashed ends with a sync of the file (`fdatasync`) and
        /// its saved state, and while hashing is the slower side windows do not grow; at 4 MiB that doubled the
        /// syncs and cost 8 % of a verified 1 GiB download's CPU (BENCHMARKS.md).
        public var windowSize: Int
        /// The most bytes of file data all downloads together keep in memory — windows on their way to the disk,
        /// bytes waiting to be written or hashed — as one budget: each of `maximumActiveDownloads` gets an equal share
        /// (at least 1 MiB), and its windows, which otherwise grow up to 128 MiB while the disk keeps up, stay within it.
        /// On Linux (glibc) a manager with a budget also gives freed memory back to the system four times a second
        /// while downloads run (`malloc_trim`): chunks that URLSession allocates on one thread and the disk frees on
        /// another otherwise leave freed memory in many malloc arenas, which made 20 downloads of 100 MiB peak at
        /// 157–171 MB; with a budget of 64 MiB they peak at about 80 MB (BENCHMARKS.md). Default `nil`: no budget
        /// (each download is bounded by its windows alone).
        public var memoryBudget: Int?
        /// How long a queued download runs before its start (the `downloading` state) is saved, in seconds
        /// (`DownloadManager.savesStartLater`): a download that ends sooner is saved only by its later lines.
        /// Package: tests choose it.
        package var startSaveDelay: TimeInterval = 1
        /// Bytes of a fresh download's first request, which opens a connection (see
        /// `Transfer.Configuration.firstWindowSize`). Internal: tests that choose their windows choose this too.
        package var firstWindowSize = Int(Transfer.Configuration().firstWindowSize)
        /// When a run's first request, on a new connection, asks for a whole window (see
        /// `Transfer.Configuration.firstRequestBudget`); `nil`: it asks for 16 KiB. Package: tests written around
        /// short first requests turn it off (`asksWholeFirstWindow`).
        package var firstRequestBudget = Transfer.Configuration().firstRequestBudget
        /// Whether a fresh download's first request asks for a whole window, ended early when it is slow (default
        /// `true`: a small file is one request); `false`: it asks for 16 KiB and the rest follows in windows, for a
        /// server that pauses mid-body (`dl`'s `DL_FIRST_REQUEST_CUT=0`).
        public var asksWholeFirstWindow: Bool {
            get { firstRequestBudget != nil }
            set {
                firstRequestBudget =
                    newValue ? (firstRequestBudget ?? Transfer.Configuration().firstRequestBudget) : nil
            }
        }
        /// Several connections are used only when at least twice this many bytes are missing
        /// (`Transfer.Configuration`). Internal: tests use small files.
        var minimumSegmentSize = Transfer.Configuration().minimumSegmentSize
        /// Whether a download with a known length checks the free space first (`Transfer.Configuration`). Internal:
        /// tests of a disk that fills up mid-download turn it off.
        var checksFreeSpace = true
        /// Called where a transfer picks up a partial file, before its file work (`Transfer.Configuration`). Internal:
        /// tests hold it there.
        var beforeRestore: (@Sendable () -> Void)?
        /// Where verified files go; `directory/completed` when `nil` (the default). Set it to put finished files
        /// somewhere else, as `dl` does with its `--dir`.
        public var completedDirectory: URL?
        /// Where the state lives — the lock, the receipts journal and the partial files — created with mode 0700;
        /// `directory/.downloader` when `nil` (the default). Keep it apart from where downloads land: no downloaded
        /// file can take a hidden name, so the default cannot collide with one.
        public var stateDirectory: URL?
        /// How long a new manager waits for another one (in this process or another) to let go of the state
        /// directory, in seconds; waiting blocks the thread that creates the manager. Default 0: fail at once with
        /// `DownloadError.directoryLocked`. `.infinity` waits as long as it takes.
        public var directoryLockTimeout: TimeInterval
        /// At shutdown, when nothing unfinished is left (nothing queued, running, suspended, or failed with bytes to
        /// resume), delete the state folder instead of keeping completed receipts: the directory then holds only the
        /// downloaded files, as `dl` wants. Default `false`: receipts are kept, so completed URLs are answered from
        /// them later.
        public var removesStateWhenFinished: Bool
        /// Whether a new manager continues the downloads its directory's previous owner was running or had waiting
        /// when it stopped — by `shutdown()`, a signal, a crash or `kill -9` (`DownloadReceipt.isInterrupted`) — as
        /// `resumeInterrupted()` does, right after it opens the directory. Downloads a caller suspended stay
        /// suspended either way. Default `false`: opening a directory starts no transfer (a program that only lists
        /// or inspects it sends nothing), and the caller decides with `resumeInterrupted()`; a service that should
        /// pick up where it stopped sets `true`.
        public var continuesInterruptedDownloads: Bool
        /// The manager's cookies (`DownloadCookieJar`, e.g. read from curl's, wget's or a browser's cookie file):
        /// sent with every request they match (beside a download's own `Cookie` header, which wins for a name both
        /// give), and updated by every response's `Set-Cookie`; write it out afterwards to keep a login. Default
        /// `nil`: the manager keeps an empty jar of its own in memory, for its life. Cookies are never written to the
        /// manager's state.
        public var cookies: DownloadCookieJar?
        /// How a download's file gets its room before its bytes arrive (`FileAllocation`, aria2's names). Default
        /// `.none`.
        public var fileAllocation: FileAllocation

        /// Creates a configuration with the defaults.
        /// - Parameter directory: where receipts and files live.
        public init(directory: URL) {
            self.directory = directory
            maximumActiveDownloads = 4
            prioritization = .fifo
            retryLimit = 5
            retryBaseDelay = 1
            maximumRetryDelay = 60
            stallTimeout = 30
            lowestSpeedLimit = nil
            maximumBytesPerSecond = nil
            userAgent = "Downloader/\(DownloadManager.version)"
            prepareRequest = nil
            credentials = [:]
            lowestSpeedInterval = 30
            windowSize = 8 << 20
            memoryBudget = nil
            connectionsPerDownload = 1
            completedDirectory = nil
            stateDirectory = nil
            directoryLockTimeout = 0
            removesStateWhenFinished = false
            continuesInterruptedDownloads = false
            cookies = nil
            fileAllocation = .none
            log = nil
        }
    }
}
