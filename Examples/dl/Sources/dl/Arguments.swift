import Downloader
import Foundation

/// A command line that cannot be run; `dl` exits with status 2.
struct UsageError: Error {
    let message: String
}

/// The parsed command line of `dl`.
struct Arguments {
    /// One URL with what the command line and the input file say about it.
    struct Request {
        var url: URL
        /// Where its file goes, when not a name in DIR: a folder (`nil`: DIR) and a file name.
        var destination: (folder: String?, name: String)?
        var checksum: Checksum?
        var headers: [String: String] = [:]
        /// Other URLs of the same file (tab-separated on its input file line).
        var mirrors: [URL] = []
    }

    var directory = "."
    /// Whether `--dir`/`-P` was given (with `-O`, the state otherwise lives in the output's folder).
    var directoryGiven = false
    /// `-O`: the one URL's exact file.
    var output: String?
    /// `-o`: the one URL's file name inside DIR.
    var outputName: String?
    /// `-i`: the input file, read as the downloads need it (`nil` when it held one URL, which is then in `requests`).
    var input: InputFeed?
    var maximumActive = 4
    var lifo = false
    var md5: String?
    /// `--checksum`: the expected checksum of the one URL.
    var checksum: Checksum?
    /// `--checksum-file`: a list the URLs are checked against, by file name.
    var checksumFile: ChecksumFile?
    var checksumOptional = false
    var computesChecksum = true
    var headers: [String: String] = [:]
    /// `--user`/`--password`: the login for the hosts of the given URLs (over `.netrc`).
    var user: String?
    var password: String?
    /// `--password-file`: a file whose first line is the password; `--ask-password`: ask for it (see `Secrets`).
    var passwordFile: String?
    var asksPassword = false
    /// `--netrc-file`: the `.netrc` to read (default `~/.netrc`); `--no-netrc`: none.
    var netrcFile: String?
    var readsNetrc = true
    /// `--result-log`: a JSON Lines file of every URL's outcome (`ResultLog`).
    var resultLog: String?
    /// `--load-cookies` / `--save-cookies`: Netscape cookie files (`DownloadCookieJar`).
    var loadCookies: String?
    var saveCookies: String?
    /// `--on-complete`: a command run for each verified file (`CompletionHook`).
    var onComplete: String?
    /// The login of each URL's host (mirrors too), from `--user`/`--password`, else `.netrc`.
    var credentials: [String: DownloadCredential] = [:]
    var userAgent = "dl/\(Arguments.version)"
    var retries = 5
    var timeout: Double = 30
    var lowestSpeedLimit: Int?
    var limitRate: Int?
    var overallLimit: Int?
    /// `-x`/`-s`: connections per file.
    var connections = 1
    /// `--max-connections-per-host`: requests in flight per host over all files (`nil`: no cap).
    var connectionsPerHost: Int?
    /// `--file-allocation`: how a file's room is reserved (`FileAllocation`).
    var fileAllocation = FileAllocation.none
    var naming: FileNaming = .suggested
    var quiet = false
    var list = false
    var wait = false
    var help = false
    var showVersion = false
    var requests: [Request] = []

    /// The command line's URLs in the order given, without repeats (the input file's come from `input`).
    var urls: [URL] { requests.map(\.url) }

    /// Parses `dl`'s arguments (without the program name).
    /// - Throws: `UsageError` for unknown flags, missing, empty or bad values, malformed URLs and unsupported schemes.
    static func parse(_ arguments: [String]) throws(UsageError) -> Arguments {
        // swift-argument-parser reads `--dir=` as `--dir` and takes the next argument as its value.
        for argument in arguments.prefix(while: { $0 != "--" }) where argument.hasPrefix("--") {
            let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if parts.count == 2 && parts[1].trimmingCharacters(in: .whitespaces).isEmpty {
                throw UsageError(message: "\(parts[0]) needs a value, not an empty one")
            }
        }
        let command: DLCommand
        do {
            command = try DLCommand.parse(arguments)
        } catch {
            guard DLCommand.exitCode(for: error) != .success else {
                var result = Arguments()
                result.help = true
                return result
            }
            throw UsageError(message: DLCommand.message(for: error))
        }
        var result = try Arguments(command)
        if result.help || result.showVersion { return result }
        if result.list {
            guard command.urls.isEmpty, result.input == nil else { throw UsageError(message: "--list takes no URLs") }
            return result
        }
        try result.collectRequests(command.urls)
        try result.checkConsistency()
        try result.collectCredentials()
        return result
    }

    /// The folder the files go to: `--dir`, or without it `-O`'s folder (wget's `-O` leaves nothing elsewhere).
    var downloadDirectory: URL {
        var folder = directory
        if let output, !directoryGiven { folder = URL(fileURLWithPath: output).deletingLastPathComponent().path }
        return URL(fileURLWithPath: folder, isDirectory: true).standardizedFileURL
    }

    /// The state folder inside it, `.dl`.
    var stateDirectory: URL { downloadDirectory.appendingPathComponent(".dl", isDirectory: true) }

    /// The command line's URLs, each once; then the input file's first entries: a file of one URL joins them (so that
    /// `-o` and `--checksum` apply to it), a longer one is read as the downloads go (`input`).
    private mutating func collectRequests(_ texts: [String]) throws(UsageError) {
        var seen = Set<URL>()
        for text in texts {
            let parsed = try Self.url(text, at: "")
            if seen.insert(parsed).inserted { requests.append(Request(url: parsed)) }
        }
        input?.keepPosition(in: stateDirectory)
        if let input, case (let entry, let more) = try input.first(), !more {
            if let entry {
                let request = try Self.request(for: entry)
                if seen.insert(request.url).inserted { requests.append(request) }
            }
            self.input = nil
        }
        guard !requests.isEmpty || input != nil else { throw UsageError(message: "no URL given") }
    }

    /// A URL given as text. - Throws: `UsageError` prefixed with `place` for a URL that cannot be downloaded.
    static func url(_ text: String, at place: @autoclosure () -> String) throws(UsageError) -> URL {
        do {
            return try URL.download(text)
        } catch {
            throw UsageError(message: "\(place())\(text): \(error.reason)")
        }
    }

    /// The request of one input file entry. - Throws: `UsageError` naming its line for a bad URL.
    static func request(for entry: InputFile.Entry) throws(UsageError) -> Request {
        let parsed = try url(entry.text, at: "input file line \(entry.line): ")
        var request = Request(url: parsed, checksum: entry.checksum, headers: entry.headers)
        for mirror in entry.mirrors {
            request.mirrors.append(try url(mirror, at: "input file line \(entry.line): "))
        }
        if entry.output != nil || entry.directory != nil {
            let name = entry.output ?? fileName(of: parsed)
            request.destination = (entry.directory, name)
        }
        return request
    }

    /// How many URLs the run has, as far as the single-URL rules need to know: 2 stands for "more than one".
    private var urlCount: Int { requests.count + (input == nil ? 0 : 2) }

    /// Flags that are given together but cannot apply.
    private mutating func checkConsistency() throws(UsageError) {
        let passwordSources = [
            ("--password", password != nil), ("--password-file", passwordFile != nil), ("--ask-password", asksPassword),
        ].filter(\.1).map(\.0)
        if let first = passwordSources.first, user == nil { throw UsageError(message: "\(first) needs --user") }
        if passwordSources.count > 1 {
            throw UsageError(message: "--password, --password-file and --ask-password: give one")
        }
        if netrcFile != nil && !readsNetrc { throw UsageError(message: "--netrc-file and --no-netrc: give one") }
        if let md5 {
            guard checksum == nil else { throw UsageError(message: "--md5 and --checksum: give one") }
            checksum = Checksum(md5: md5)
        }
        if checksum != nil && !computesChecksum {
            throw UsageError(message: "a checksum to verify and --no-md5 contradict each other")
        }
        if checksum != nil && urlCount != 1 {
            throw UsageError(message: "--checksum and --md5 apply to a single URL, but more were given")
        }
        if let outputName {
            guard output == nil else { throw UsageError(message: "-o and -O: give one") }
            guard urlCount == 1 else {
                throw UsageError(message: "-o/--out applies to a single URL, but more were given")
            }
            requests[0].destination = (nil, outputName)
        }
        if let output {
            guard urlCount == 1 else {
                throw UsageError(message: "-O/--output applies to a single URL, but more were given")
            }
            if output == "-" { return }  // stdout: no file, no state (see `StreamOutput`)
            let file = URL(fileURLWithPath: output)
            requests[0].destination = (file.deletingLastPathComponent().path, file.lastPathComponent)
        }
        if let list = checksumFile, !checksumOptional {
            for request in requests { try Self.requireChecksum(of: request, in: list) }
        }
    }

    /// `--checksum-file` without `--checksum-optional`: every URL needs its checksum.
    static func requireChecksum(of request: Request, in list: ChecksumFile) throws(UsageError) {
        guard request.checksum == nil && list.checksum(for: request.url) == nil else { return }
        throw UsageError(
            message:
                "no checksum for \(request.url.lastPathComponent) in the --checksum-file (--checksum-optional allows that)"
        )
    }
}
