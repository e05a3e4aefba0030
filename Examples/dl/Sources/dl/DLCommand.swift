import ArgumentParser

/// `dl`'s command line as swift-argument-parser reads it: every flag, its aliases (wget's, curl's and aria2c's
/// spellings) and its `--help` group. Values stay text here; `Arguments.init(_:)` checks them and says what is wrong
/// in `dl`'s words.
struct DLCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dl",
        abstract: "Downloads every URL into DIR, several at once, resumably and verified.",
        usage: """
            dl [OPTION]... URL...
            dl [OPTION]... -i FILE
            dl --list [--dir DIR]
            """,
        discussion: """
            Run the same command again after Ctrl-C, kill or a network fault and it continues where it stopped (the \
            state lives in DIR/.dl until nothing is unfinished). Each verified file's absolute path is printed on \
            stdout; progress and messages go to stderr. wget's, curl's and aria2c's spellings work where they mean \
            the same.
            """,
        helpNames: [.short, .long]
    )

    @OptionGroup(title: "Startup") var startup: Startup
    @OptionGroup(title: "Download") var download: Download
    @OptionGroup(title: "Download: logins and cookies") var login: Login
    @OptionGroup(title: "Download: retries and limits") var limits: Limits
    @OptionGroup(title: "Verification") var verification: Verification
    @OptionGroup(title: "Output") var output: Output

    @Argument(help: ArgumentHelp("http:// or https:// URLs, each fetched once", valueName: "URL"))
    var urls: [String] = []

    /// `-V`, `-i`.
    struct Startup: ParsableArguments {
        @Flag(name: [.customShort("V"), .long], help: "Print the version and exit.")
        var version = false

        @Option(
            name: [.customShort("i", allowingJoined: true), .long],
            help: ArgumentHelp(
                """
                Read URLs from FILE (- for stdin): one file per line — its URL, then mirrors of the same file after \
                tabs — each optionally followed by indented option lines, as aria2 writes them: out=NAME, dir=DIR, \
                checksum=ALG=HEX, header=Name: value. Read as the downloads go (a list of millions, or \
                generate-urls | dl -i -, costs the memory of a few thousand); a URL listed twice is fetched once and \
                its file checked again with a HEAD; a bad line stops the reading (the downloads taken finish) and \
                exits 2 naming it. After a kill or a signal, the same command reads FILE from where it stopped, then \
                its beginning (unless FILE changed).
                """, valueName: "FILE"))
        var inputFile: String?
    }

    /// Where files go and how they are asked for.
    struct Download: ParsableArguments {
        @Option(
            name: [
                .customShort("P", allowingJoined: true), .customShort("d", allowingJoined: true), .customLong("dir"),
                .customLong("directory-prefix"),
            ],
            help: ArgumentHelp(
                "Where files and download state live (default: the current directory).", valueName: "DIR"))
        var dir: String?

        @Option(
            name: [.customShort("o", allowingJoined: true), .customLong("out")],
            help: ArgumentHelp(
                """
                The one URL's file name inside DIR; a file partly downloaded from another URL (an expired signed \
                link) continues from this one if it proves the same (without -o, so does the partial file of a link \
                with the same host and path and another query: a link signed again).
                """, valueName: "NAME"))
        var out: String?

        @Option(
            name: [.customShort("O", allowingJoined: true), .customLong("output"), .customLong("output-document")],
            help: ArgumentHelp(
                """
                Write the one URL to exactly FILE, replacing it once verified (the state lives in FILE's folder \
                unless --dir is given). -O - writes the one URL's bytes to stdout as they arrive (dl -O - URL | tar \
                x): no resume; the digest is checked at the end, and a mismatch exits 1 saying the bytes already \
                written must be discarded.
                """, valueName: "FILE"))
        var output: String?

        @Flag(
            name: [.customShort("c"), .customLong("continue")],
            help: "Accepted for habit's sake: resuming is always on.")
        var resume = false

        @Option(
            name: [
                .customShort("j", allowingJoined: true), .customLong("max-active"),
                .customLong("max-concurrent-downloads"),
            ],
            help: ArgumentHelp("Downloads at once (default 4).", valueName: "N"))
        var maxActive: String?

        @Flag(help: "Start the most recently listed waiting URL first (among the next 1,000).")
        var lifo = false

        @Option(
            help: ArgumentHelp(
                "suggested (the server's or the URL's name, default) or md5 (md5 of the URL).", valueName: "MODE"))
        var naming: String?

        @Option(
            name: [.customShort("H", allowingJoined: true), .customLong("header")],
            help: ArgumentHelp("An extra request header (repeatable).", valueName: "'Name: value'"))
        var header: [String] = []

        @Option(
            name: [.customShort("U", allowingJoined: true), .customLong("user-agent")],
            help: ArgumentHelp("The User-Agent header (default dl/VERSION).", valueName: "TEXT"))
        var userAgent: String?

        @Option(
            name: [
                .customShort("x", allowingJoined: true), .customShort("s", allowingJoined: true),
                .customLong("max-connection-per-server"), .customLong("split"),
            ],
            help: ArgumentHelp(
                """
                Fetch each file over N connections at once (1–16, default 1) when the server allows it (Range, a \
                validator); -s N and --split N mean the same (as in aria2c: for quiet, use -q).
                """, valueName: "N"))
        var connections: String?

        @Option(
            help: ArgumentHelp(
                """
                falloc reserves each file's blocks once its length is known, without changing its length (prealloc \
                means the same here); default none: blocks are taken as bytes arrive.
                """, valueName: "none|prealloc|falloc"))
        var fileAllocation: String?

        @Option(
            name: .customLong("max-connections-per-host"),
            help: ArgumentHelp(
                """
                At most N requests at once to one host over all files (default: no cap; curl's \
                --parallel-max-host); a host that answers 503 or 429 while others are in flight gets fewer, and the \
                refused request waits for its turn without spending a retry.
                """, valueName: "N"))
        var connectionsPerHost: String?

        @Flag(help: "If another dl is using DIR, wait for it instead of exiting 1.")
        var wait = false
    }

    /// Logins and cookies.
    struct Login: ParsableArguments {
        @Option(
            name: [.customLong("user"), .customLong("http-user")],
            help: ArgumentHelp(
                """
                The login for the URLs' hosts, sent only when a host answers 401 with a Basic challenge, then with \
                each request to it (never to another host, never saved).
                """, valueName: "USER"))
        var user: String?

        @Option(
            name: [.customLong("password"), .customLong("http-password")],
            help: ArgumentHelp(
                """
                Its password (default: DL_PASSWORD, else empty). Blanked in the process list once read, but a shell's \
                history keeps it: prefer --password-file or --ask-password.
                """, valueName: "PASSWORD"))
        var password: String?

        @Option(help: ArgumentHelp("Read the password from FILE's first line.", valueName: "FILE"))
        var passwordFile: String?

        @Flag(help: "Ask for the password on the terminal (without a terminal: one line of stdin).")
        var askPassword = false

        @Option(
            help: ArgumentHelp(
                """
                Read logins from FILE instead of ~/.netrc (read by default: machine, login, password and default \
                entries, as curl, wget and aria2c read them).
                """, valueName: "FILE"))
        var netrcFile: String?

        @Flag(help: "Do not read ~/.netrc.")
        var noNetrc = false

        @Option(
            help: ArgumentHelp(
                """
                Send the cookies of FILE (the Netscape format of curl, wget, aria2c and browser exports) with every \
                request they match, never to another host.
                """, valueName: "FILE"))
        var loadCookies: String?

        @Option(
            help: ArgumentHelp(
                """
                Write the cookies at the end (those loaded and those the servers set) to FILE, mode 0600; cookies \
                are never written to the download state.
                """, valueName: "FILE"))
        var saveCookies: String?
    }

    /// Retries, timeouts and rates.
    struct Limits: ParsableArguments {
        @Option(
            name: [.customShort("t", allowingJoined: true), .customLong("tries")],
            help: ArgumentHelp("Attempts per URL, as wget counts them (default 6; 0 = no limit).", valueName: "N"))
        var tries: String?

        @Option(
            help: ArgumentHelp(
                "Retries of transient faults per URL (default 5), each resuming by Range.", valueName: "N"))
        var retries: String?

        @Option(
            name: [.customShort("T", allowingJoined: true), .customLong("timeout")],
            help: ArgumentHelp(
                "A request that receives nothing for this long is retried (default 30).", valueName: "SECONDS"))
        var timeout: String?

        @Option(help: ArgumentHelp("A request slower than RATE for 30 s is retried like a stall.", valueName: "RATE"))
        var lowestSpeedLimit: String?

        @Option(
            help: ArgumentHelp(
                "At most RATE per download, e.g. 500k or 2M (bytes per second, k = 1024).", valueName: "RATE"))
        var limitRate: String?

        @Option(
            name: [.customLong("max-overall-limit"), .customLong("max-overall-download-limit")],
            help: ArgumentHelp("At most RATE for all downloads together.", valueName: "RATE"))
        var overallLimit: String?
    }

    /// What a file is checked against.
    struct Verification: ParsableArguments {
        @Option(help: ArgumentHelp("Expected MD5 of the file (one URL only).", valueName: "HEX"))
        var md5: String?

        @Option(
            help: ArgumentHelp(
                "Expected checksum (one URL): sha-256=…, sha256:…, sha-1=…, md5=…, or bare hex.", valueName: "ALG=HEX"
            ))
        var checksum: String?

        @Option(
            help: ArgumentHelp(
                """
                Check each URL against the line for its file name in FILE, the output of sha256sum, sha1sum or \
                md5sum (or their --tag form); a URL without a line is an error.
                """, valueName: "FILE"))
        var checksumFile: String?

        @Flag(help: "With --checksum-file: URLs without a line are downloaded unchecked.")
        var checksumOptional = false

        @Flag(name: .customLong("no-md5"), help: "Do not hash files (faster; only their length is checked).")
        var noMD5 = false
    }

    /// What `dl` prints and runs.
    struct Output: ParsableArguments {
        @Flag(name: [.customShort("q"), .long], help: "No progress or messages (errors are still reported).")
        var quiet = false

        @Option(
            name: [.customLong("on-complete"), .customLong("on-download-complete")],
            help: ArgumentHelp(
                """
                After each verified file, run sh -c 'CMD "$1"' with the file's path as $1 and DL_PATH, DL_URL, \
                DL_CHECKSUM in the environment (one at a time, while the downloads go on); a failure is reported, \
                not fatal.
                """, valueName: "CMD"))
        var onComplete: String?

        @Option(
            help: ArgumentHelp(
                """
                One JSON line per URL as it ends: url, path, size, digest, status (ok or failed), error, time; each \
                line written whole (safe to read while dl runs). Reruns keep one line per URL, its latest outcome: a \
                URL logged ok gets no new line, a changed outcome replaces the old line when the run ends.
                """, valueName: "FILE"))
        var resultLog: String?

        @Flag(
            help: """
                Print the downloads known in DIR and exit, with what holds for an unfinished one: its rate limit, \
                connections and expected checksum (a rerun's command line sets the rate and connections again; the \
                checksum stays unless the rerun gives another).
                """)
        var list = false
    }
}
