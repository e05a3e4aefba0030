import ArgumentParser
import Downloader

extension Arguments {
    /// `dl`'s version.
    static let version = DownloadManager.version

    /// `dl --help`: swift-argument-parser's groups of flags, then the environment, the errors that are not retried,
    /// signals and exit codes.
    static var usage: String {
        DLCommand.helpMessage() + "\n" + epilogue
    }

    /// What `--help` says after the flags.
    static let epilogue = """
        ENVIRONMENT:
        \(platformEnvironment)
          DL_FIRST_REQUEST_CUT=0     a fresh download's first request asks for 16 KiB and the rest follows, instead
                                     of a whole window cut short when slow (for servers that pause mid-body)
          DL_IN_FLIGHT=N             how many of -i's URLs may be read and not yet done (default 1000)
          DL_PASSWORD                the password for --user when no other is given
          DL_STOP_DEADLINE=S         how long a signal's clean stop may take before dl exits anyway (default 4 s;
                                     what was saved then resumes as after kill -9)

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
