import Downloader

extension Arguments {
    /// `dl`'s version.
    static let version = DownloadManager.version

    /// `dl --help`, grouped like wget's.
    static let usage = """
        usage: dl [OPTION]... URL...
               dl [OPTION]... -i FILE
               dl --list [--dir DIR]

        Downloads every URL into DIR (default: the current directory), several at once, resumably: run the same
        command again after Ctrl-C, kill or a network fault and it continues where it stopped (the state lives in
        DIR/.dl until nothing is unfinished). Each verified file's absolute path is printed on stdout; progress and
        messages go to stderr. wget's, curl's and aria2c's spellings work where they mean the same.

        Startup:
          -h, --help                 print this help and exit
          -V, --version              print the version and exit
          -i, --input-file FILE      read URLs from FILE (- for stdin): one file per line — its URL, then mirrors
                                     of the same file after tabs — each optionally followed by indented option
                                     lines, as aria2 writes them: out=NAME, dir=DIR, checksum=ALG=HEX,
                                     header=Name: value. Read as the downloads go (a list of millions, or
                                     generate-urls | dl -i -, costs the memory of a few thousand); a URL listed
                                     twice is fetched once and its file checked again with a HEAD; a bad line
                                     stops the reading (the downloads taken finish) and exits 2 naming it.
                                     After a kill or a signal, the same command reads FILE from where it
                                     stopped, then its beginning (unless FILE changed)

        Download:
          -P, -d, --dir DIR          where files and download state live (default: the current directory);
                                     --directory-prefix means the same
          -o, --out NAME             the one URL's file name inside DIR; a file partly downloaded from another
                                     URL (an expired signed link) continues from this one if it proves the same
                                     (without -o, so does the partial file of a link with the same host and path
                                     and another query: a link signed again)
          -O, --output FILE          write the one URL to exactly FILE, replacing it once verified (the state
                                     lives in FILE's folder unless --dir is given); --output-document too
          -O -                       the one URL's bytes to stdout as they arrive (dl -O - URL | tar x): no
                                     resume; the digest is checked at the end, and a mismatch exits 1 saying the
                                     bytes already written must be discarded
          -c, --continue             accepted for habit's sake: resuming is always on
          -j, --max-active N         downloads at once (default 4); --max-concurrent-downloads too
              --lifo                 start the most recently listed waiting URL first (among the next 1,000)
              --naming MODE          suggested (the server's or the URL's name, default) or md5 (md5 of the URL)
          -H, --header 'N: v'        an extra request header (repeatable)
          -U, --user-agent TEXT      the User-Agent header (default dl/VERSION)
              --user USER            the login for the URLs' hosts, sent only when a host answers 401 with a
                                     Basic challenge, then with each request to it (never to another host, never
                                     saved); --http-user too
              --password PASSWORD    its password (default: DL_PASSWORD, else empty); --http-password too.
                                     Blanked in the process list once read, but a shell's history keeps
                                     it: prefer --password-file or --ask-password
              --password-file FILE   read the password from FILE's first line
              --ask-password         ask for the password on the terminal (without a terminal: one line of
                                     stdin)
              --netrc-file FILE      read logins from FILE instead of ~/.netrc (read by default: machine, login,
                                     password and default entries, as curl, wget and aria2c read them)
              --no-netrc             do not read ~/.netrc
              --load-cookies FILE    send the cookies of FILE (the Netscape format of curl, wget, aria2c and
                                     browser exports) with every request they match, never to another host
              --save-cookies FILE    write the cookies at the end (those loaded and those the servers set) to
                                     FILE, mode 0600; cookies are never written to the download state
          -t, --tries N              attempts per URL, as wget counts them (default 6; 0 = no limit)
              --retries N            retries of transient faults per URL (default 5), each resuming by Range
          -T, --timeout SECONDS      a request that receives nothing for this long is retried (default 30)
              --lowest-speed-limit RATE
                                     a request slower than RATE for 30 s is retried like a stall
              --limit-rate RATE      at most RATE per download, e.g. 500k or 2M (bytes per second, k = 1024)
              --max-overall-limit RATE
                                     at most RATE for all downloads together; --max-overall-download-limit too
          -x, --max-connection-per-server N
                                     fetch each file over N connections at once (1–16, default 1) when the
                                     server allows it (Range, a validator); -s N, --split N mean the same (as in
                                     aria2c: for quiet, use -q)
              --file-allocation none|prealloc|falloc
                                     falloc reserves each file's blocks once its length is known, without
                                     changing its length (prealloc means the same here); default none: blocks
                                     are taken as bytes arrive
              --max-connections-per-host N
                                     at most N requests at once to one host over all files (default: no cap;
                                     curl's --parallel-max-host); a host that answers 503 or 429 while others
                                     are in flight gets fewer, and the refused request waits for its turn
                                     without spending a retry
              --wait                 if another dl is using DIR, wait for it instead of exiting 1

        Verification:
              --md5 HEX              expected MD5 of the file (one URL only)
              --checksum ALG=HEX     expected checksum (one URL): sha-256=…, sha256:…, sha-1=…, md5=…, or bare hex
              --checksum-file FILE   check each URL against the line for its file name in FILE, the output of
                                     sha256sum, sha1sum or md5sum (or their --tag form); a URL without a line is
                                     an error
              --checksum-optional    with --checksum-file: URLs without a line are downloaded unchecked
              --no-md5               do not hash files (faster; only their length is checked)

        Output:
          -q, --quiet                no progress or messages (errors are still reported)
              --on-complete CMD      after each verified file, run sh -c 'CMD "$1"' with the file's path as $1 and
                                     DL_PATH, DL_URL, DL_CHECKSUM in the environment (one at a time, while the
                                     downloads go on); a failure is reported, not fatal; --on-download-complete too
              --result-log FILE      one JSON line per URL as it ends: url, path, size, digest, status (ok or
                                     failed), error, time; each line written whole (safe to read while dl runs).
                                     Reruns keep one line per URL, its latest outcome: a URL logged ok gets no
                                     new line, a changed outcome replaces the old line when the run ends
              --list                 print the downloads known in DIR and exit, with what holds for an
                                     unfinished one: its rate limit, connections and expected checksum (a rerun's
                                     command line sets the rate and connections again; the checksum stays unless
                                     the rerun gives another)

        Environment:
        \(platformEnvironment)
          DL_FIRST_REQUEST_CUT=0     a fresh download's first request asks for 16 KiB and the rest follows, instead
                                     of a whole window cut short when slow (for servers that pause mid-body)
          DL_IN_FLIGHT=N             how many of -i's URLs may be read and not yet done (default 1000)
          DL_PASSWORD                the password for --user when no other is given

        Errors that a retry cannot change (an unknown host, an untrusted certificate, 404 and other 4xx but 408
        and 429) fail at once; connection faults, stalls, 5xx, 408 and 429 are retried (--retries).

        Signals and pipes: SIGINT, SIGTERM and SIGHUP (a closed terminal or ssh session) suspend every download and
        save its state; a second signal exits at once. A closed stdout (dl ... | head) is reported once on stderr
        and the downloads go on to the end; names and server text on stderr show control characters escaped.

        Exit status: 0 all verified, 1 any failed (or another dl is using DIR, or DIR/.dl is a symbolic link),
        2 usage error, 130 interrupted (SIGINT), 143 terminated (SIGTERM), 129 hung up (SIGHUP).
        """
}

extension Arguments {
    #if os(Linux)
        /// The proxy and TLS lines of `--help`: what libcurl, under Linux's URLSession, reads.
        static let platformEnvironment = """
              http_proxy, https_proxy    a forward proxy for http:// and https:// URLs (http://HOST:PORT; libcurl reads
                                         them, http_proxy in lower case only; ranges and resumes go through it);
                                         ALL_PROXY for both
              no_proxy                   hosts reached directly, comma-separated (example.com,.internal,10.0.0.1)
              TLS                        only the system's CA store is trusted: to trust a private CA, install it there
                                         (Debian/Ubuntu: /usr/local/share/ca-certificates/NAME.crt, then
                                         update-ca-certificates; RHEL/Fedora: /etc/pki/ca-trust/source/anchors/, then
                                         update-ca-trust); SSL_CERT_FILE and CURL_CA_BUNDLE are not read
            """
    #else
        /// The proxy and TLS lines of `--help`: Apple's URLSession takes both from the system, not the environment.
        static let platformEnvironment = """
              http_proxy, https_proxy    not read on this system: URLSession uses the proxies of the system's
                                         network settings
              TLS                        the certificates the system trusts: to trust a private CA, add it to the
                                         System keychain as trusted (security add-trusted-cert -d -r trustRoot
                                         -k /Library/Keychains/System.keychain CA.pem)
            """
    #endif
}
