import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Classifies an error from URLSession, once, for every request: a `DownloadError` whose kind says whether retrying
/// can help (`DownloadError.isTransient`), whose reason reads as a sentence ("the network connection was lost
/// (URLError -1005)") and says what to do next where the answer is known, and whose `underlyingError` is the
/// `URLError` itself.
enum TransportError {
    /// What a failed request means.
    enum Kind: Equatable {
        /// The host name could not be resolved.
        case hostNotFound
        /// TLS failed for a reason a retry does not change (certificate untrusted, expired, for another host).
        case tls
        /// The response's header is beyond libcurl's limits (a line over 100 KB, which it reports as "Out of
        /// memory", or over 300 KB in all): the server sends the same again.
        case headerTooLarge
        /// Anything else: a connection refused, reset, lost or timed out — worth a retry.
        case transient
    }

    /// The download error for a request that URLSession ended with `error`.
    /// - Parameters:
    ///   - error: URLSession's error.
    ///   - url: the download's URL.
    /// - Returns: `.hostNotFound`, `.tlsFailure` or `.invalidURL` (permanent), else `.connectionFailed` (transient,
    ///   also for an answer that is not HTTP), keeping the `URLError`.
    static func failure(_ error: any Error, url: URL) -> DownloadError {
        let ns = error as NSError
        let underlying: any Error & Sendable = urlError(ns) ?? SavedError(description: "\(error)")
        let reason = describe(error)
        if ns.domain == NSURLErrorDomain && (ns.code == NSURLErrorBadURL || ns.code == NSURLErrorUnsupportedURL) {
            // libcurl's "Received HTTP/0.9 when not allowed" comes as `unsupportedURL` too: the answer did not start
            // with a status line. Mostly bytes a previous answer left on a reused connection (a body sent after a
            // HEAD or a 304), which libcurl then closes: a retry goes over another.
            guard messages(of: ns).contains(where: { $0.contains("HTTP/0.9") }) else { return malformed(url, ns) }
            return .connectionFailed(
                url,
                reason: "the server's reply was not an HTTP answer (\(reason)); a previous answer may have left "
                    + "bytes on the connection",
                underlying: underlying)
        }
        switch kind(domain: ns.domain, code: ns.code, message: messages(of: ns).joined(separator: ": ")) {
        case .hostNotFound:
            return .hostNotFound(
                url,
                reason: reason + "; check the host name in the URL, or this machine's DNS (a retry would not help)",
                underlying: underlying)
        case .tls:
            return .tlsFailure(url, reason: reason + "; " + trustAdvice, underlying: underlying)
        case .headerTooLarge:
            return .invalidResponse(
                url,
                reason: "the response header is too large (libcurl takes at most 100 KiB a line and 300 KiB in all; it "
                    + "said: \(reason)); a retry would get the same")
        case .transient:
            return .connectionFailed(url, reason: reason, underlying: underlying)
        }
    }

    /// How an error of `domain` and `code`, with libcurl's `message`, is classified.
    ///
    /// swift-corelibs-foundation maps libcurl's "could not resolve host" to `cannotFindHost` (-1003) and every TLS
    /// failure to `unknown` (-1) with libcurl's sentence ("SSL certificate problem: self-signed certificate"), so
    /// TLS is recognised by that sentence there and by the `serverCertificate…` codes on Apple platforms. A handshake
    /// cut short ("SSL_connect: … connection reset", `secureConnectionFailed`) stays transient.
    static func kind(domain: String, code: Int, message: String) -> Kind {
        guard domain == NSURLErrorDomain else { return .transient }
        switch code {
        case NSURLErrorCannotFindHost, NSURLErrorDNSLookupFailed:
            return .hostNotFound
        case NSURLErrorServerCertificateHasBadDate, NSURLErrorServerCertificateUntrusted,
            NSURLErrorServerCertificateHasUnknownRoot, NSURLErrorServerCertificateNotYetValid,
            NSURLErrorClientCertificateRejected, NSURLErrorClientCertificateRequired:
            return .tls
        case NSURLErrorUnknown:
            let text = message.lowercased()
            let certificate =
                text.contains("ssl certificate problem") || text.contains("certificate subject name")
                || text.contains("no alternative certificate subject name") || text.contains("certificate verify")
                || text.contains("ssl peer certificate") || text.contains("unable to get local issuer")
            if certificate { return .tls }
            // libcurl's CURLE_OUT_OF_MEMORY is what a header line beyond CURL_MAX_HTTP_HEADER gives; a real lack of
            // memory would not leave the process to read it.
            let header = text.contains("too large response headers") || text.hasPrefix("out of memory")
            return header ? .headerTooLarge : .transient
        default:
            return .transient
        }
    }

    /// What the TLS error says to do: Linux URLSession trusts only the system's CA store.
    /// URLSession refused the URL itself: retrying cannot help. An IPv6 literal host is the known case on Linux:
    /// swift-corelibs-foundation before its fix of issue #5496 (PR #5498) compares libcurl's host (`[::1]`) with
    /// `URL.host` (`::1`) and refuses every such URL.
    private static func malformed(_ url: URL, _ error: NSError) -> DownloadError {
        var reason = "URLSession refused the URL (\(describe(error)))"
        if url.absoluteString.contains("://[") || (url.host?.contains(":") ?? false) {
            reason =
                "URLSession on Linux cannot reach an IPv6 literal host (swift-corelibs-foundation #5496, fixed by "
                + "PR #5498 in a later toolchain): give the address a name (an /etc/hosts line such as `::1 myhost6`) "
                + "and use it in the URL"
        }
        return .invalidURL(url, reason: reason + "; a retry would not help")
    }

    #if os(Linux)
        static let trustAdvice =
            "retrying will not help. URLSession on Linux trusts only the system CA store: to trust a private CA, "
            + "install it there (Debian/Ubuntu: copy it as /usr/local/share/ca-certificates/NAME.crt and run "
            + "update-ca-certificates; RHEL/Fedora: copy it to /etc/pki/ca-trust/source/anchors/ and run "
            + "update-ca-trust); SSL_CERT_FILE and CURL_CA_BUNDLE are not read"
    #else
        static let trustAdvice =
            "retrying will not help. URLSession trusts the certificates the system trusts: to trust a private CA, "
            + "add it to the System keychain as trusted (`sudo security add-trusted-cert -d -r trustRoot -k "
            + "/Library/Keychains/System.keychain CA.pem` on macOS; a configuration profile on iOS)"
    #endif

    /// The `URLError` for an error of `NSURLErrorDomain`.
    private static func urlError(_ error: NSError) -> URLError? {
        guard error.domain == NSURLErrorDomain else { return nil }
        // Built from the code and the user info: on Linux an `NSError` does not bridge to `URLError` with `as?`.
        // (`Code(rawValue:)` is failable on Linux only; the cast keeps one spelling for both.)
        guard let code = URLError.Code(rawValue: error.code) as URLError.Code? else { return nil }
        return URLError(code, userInfo: error.userInfo)
    }

    private static func messages(of error: NSError) -> [String] {
        var parts: [String] = []
        for candidate in [error, error.userInfo[NSUnderlyingErrorKey] as? NSError].compactMap({ $0 }) {
            if let text = candidate.userInfo[NSLocalizedDescriptionKey] as? String, !text.isEmpty, text != "(null)",
                !parts.contains(text)
            {
                parts.append(text)
            }
        }
        return parts
    }

    static func describe(_ error: any Error) -> String {
        let error = error as NSError
        var parts = messages(of: error)
        if parts.isEmpty, let known = knownCodes[error.code], error.domain == NSURLErrorDomain { parts.append(known) }
        if parts.isEmpty { parts.append("the transfer failed") }
        let domain = error.domain == NSURLErrorDomain ? "URLError" : error.domain
        return "\(parts.joined(separator: ": ")) (\(domain) \(error.code))"
    }

    private static let knownCodes: [Int: String] = [
        -1: "an unknown transfer error (for example a malformed response header)",
        -1001: "the request timed out", -1003: "the host was not found", -1004: "could not connect to the server",
        -1005: "the network connection was lost", -1011: "the server's response was unusable",
    ]
}

extension DownloadError {
    /// Whether the request failed on an answer that was not HTTP (libcurl's "HTTP/0.9", `TransportError.failure`).
    var isNotHTTPAnswer: Bool {
        self == .connectionFailed && (underlyingError as? URLError)?.code == .unsupportedURL
    }
}
