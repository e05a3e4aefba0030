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
        var result = Arguments()
        var texts: [String] = []
        var index = 0
        var optionsEnded = false

        func value(for flag: String, inline: String?) throws(UsageError) -> String {
            let text: String
            if let inline {
                text = inline
            } else {
                index += 1
                guard index < arguments.count else { throw UsageError(message: "\(flag) needs a value") }
                text = arguments[index]
            }
            guard !text.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw UsageError(message: "\(flag) needs a value, not an empty one")
            }
            return text
        }

        while index < arguments.count {
            let argument = arguments[index]
            if optionsEnded || !argument.hasPrefix("-") || argument == "-" {
                texts.append(argument)
                index += 1
                continue
            }
            var flag = argument
            var inline: String?
            if argument.hasPrefix("--") {
                let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                flag = String(parts[0])
                inline = parts.count == 2 ? String(parts[1]) : nil
            } else if argument.count > 2, Self.shortFlagsWithValues.contains(String(argument.prefix(2))) {
                flag = String(argument.prefix(2))  // wget's -Pdir, -Ofile, aria2's -x4, -j8, -ddir
                inline = String(argument.dropFirst(2))
            }
            switch flag {
            case "--":
                optionsEnded = true
            case "--dir", "-P", "--directory-prefix", "-d":
                result.directory = try value(for: flag, inline: inline)
                result.directoryGiven = true
            case "--output", "-O", "--output-document":
                let path = try value(for: flag, inline: inline)
                result.output = path  // "-": the verified stream to stdout
            case "--out", "-o":
                let name = try value(for: flag, inline: inline)
                let components = name.split(separator: "/")
                guard !name.hasPrefix("/"), !components.contains(".."), !components.isEmpty else {
                    throw UsageError(message: "\(flag) is a file name inside the folder (-O takes a path)")
                }
                result.outputName = name
            case "--input-file", "-i":
                result.input = try InputFeed(path: try value(for: flag, inline: inline), for: flag)
            case "--continue", "-c":
                break  // resuming is always on
            case "--max-active", "-j", "--max-concurrent-downloads":
                result.maximumActive = try integer(value(for: flag, inline: inline), for: flag, minimum: 1)
            case "--lifo":
                result.lifo = true
            case "--md5":
                let text = try value(for: flag, inline: inline)
                guard Hashing.MD5Digest(hexString: text) != nil else {
                    throw UsageError(message: "--md5 needs 32 hexadecimal digits, not \"\(text)\"")
                }
                result.md5 = text
            case "--no-md5":
                result.computesChecksum = false
            case "--checksum":
                let text = try value(for: flag, inline: inline)
                do {
                    result.checksum = try Checksum(parsing: text)
                } catch {
                    throw UsageError(message: "--checksum: \(error.reason)")
                }
            case "--checksum-file":
                result.checksumFile = try ChecksumFile(
                    parsing: readText(try value(for: flag, inline: inline), for: flag))
            case "--checksum-optional":
                result.checksumOptional = true
            case "--header", "-H":
                let (name, headerValue) = try header(value(for: flag, inline: inline), context: "--header")
                result.headers[name] = headerValue
            case "--user", "--http-user":
                result.user = try value(for: flag, inline: inline)
            case "--password", "--http-password":
                result.password = try value(for: flag, inline: inline)
            case "--password-file":
                result.passwordFile = try value(for: flag, inline: inline)
            case "--ask-password":
                result.asksPassword = true
            case "--netrc-file":
                result.netrcFile = try value(for: flag, inline: inline)
            case "--no-netrc":
                result.readsNetrc = false
            case "--load-cookies":
                result.loadCookies = try value(for: flag, inline: inline)
            case "--save-cookies":
                result.saveCookies = try value(for: flag, inline: inline)
            case "--result-log":
                result.resultLog = try value(for: flag, inline: inline)
            case "--on-complete", "--on-download-complete":
                result.onComplete = try value(for: flag, inline: inline)
            case "--user-agent", "-U":
                result.userAgent = try value(for: flag, inline: inline)
            case "--retries":
                result.retries = try integer(value(for: flag, inline: inline), for: flag, minimum: 0)
            case "--tries", "-t":
                // wget counts attempts, and 0 means no limit.
                let tries = try integer(value(for: flag, inline: inline), for: flag, minimum: 0)
                result.retries = tries == 0 ? Int.max : tries - 1
            case "--timeout", "-T":
                let text = try value(for: flag, inline: inline)
                guard let seconds = Double(text), seconds > 0, seconds.isFinite else {
                    throw UsageError(message: "\(flag) needs a number of seconds above 0, not \"\(text)\"")
                }
                result.timeout = seconds
            case "--lowest-speed-limit":
                result.lowestSpeedLimit = try rate(value(for: flag, inline: inline), for: flag)
            case "--limit-rate":
                result.limitRate = try rate(value(for: flag, inline: inline), for: flag)
            case "--max-overall-limit", "--max-overall-download-limit":
                result.overallLimit = try rate(value(for: flag, inline: inline), for: flag)
            case "--max-connection-per-server", "-x", "--split", "-s":
                let text: String
                do {
                    text = try value(for: flag, inline: inline)
                } catch  where flag == "-s" {
                    throw UsageError(message: "-s is aria2c's --split (a number of connections); for quiet use -q")
                }
                guard let count = Int(text), (1...16).contains(count) else {
                    if flag == "-s" && Int(text) == nil {
                        throw UsageError(
                            message: "-s is aria2c's --split and needs a number of connections, not \"\(text)\"; "
                                + "for quiet use -q")
                    }
                    throw UsageError(message: "\(flag) needs a whole number from 1 to 16, not \"\(text)\"")
                }
                result.connections = count
            case "--max-connections-per-host":
                let text = try value(for: flag, inline: inline)
                guard let count = Int(text), count >= 1 else {
                    throw UsageError(message: "\(flag) needs a whole number of 1 or more, not \"\(text)\"")
                }
                result.connectionsPerHost = count
            case "--file-allocation":
                let text = try value(for: flag, inline: inline)
                guard let allocation = FileAllocation(rawValue: text) else {
                    throw UsageError(message: "\(flag) takes none, prealloc or falloc, not \"\(text)\"")
                }
                result.fileAllocation = allocation
            case "--naming":
                switch try value(for: flag, inline: inline) {
                case "suggested": result.naming = .suggested
                case "md5": result.naming = .md5OfURL
                case let other: throw UsageError(message: "--naming is suggested or md5, not \"\(other)\"")
                }
            case "--quiet", "-q":
                result.quiet = true
            case "--list":
                result.list = true
            case "--wait":
                result.wait = true
            case "--help", "-h":
                result.help = true
            case "--version", "-V":
                result.showVersion = true
            default:
                let suggestion = Self.suggestion(for: flag).map { "did you mean \($0)? " } ?? ""
                throw UsageError(message: "unknown option \(flag) (\(suggestion)dl --help lists them)")
            }
            if inline != nil && flagTakesNoValue(flag) {
                throw UsageError(message: "\(flag) takes no value")
            }
            index += 1
        }

        if result.help || result.showVersion { return result }
        if result.list {
            guard texts.isEmpty, result.input == nil else { throw UsageError(message: "--list takes no URLs") }
            return result
        }
        try result.collectRequests(texts)
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
    static func url(_ text: String, at place: String) throws(UsageError) -> URL {
        do {
            return try URL.download(text)
        } catch {
            throw UsageError(message: "\(place)\(text): \(error.reason)")
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
