import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Issue #23: errors are classified once — transient ones are retried, permanent ones fail at once with the reason
/// and the next step — and `underlyingError` keeps URLSession's `URLError`.
@Suite("Error classification")
struct ErrorClassificationTests {
    @Test("URLSession errors: unknown host and certificate problems are permanent; lost connections are transient")
    func classification() {
        let cases: [(Int, String, TransportError.Kind)] = [
            (NSURLErrorCannotFindHost, "Could not resolve host: nosuchhost.invalid", .hostNotFound),
            (NSURLErrorUnknown, "SSL certificate problem: self-signed certificate", .tls),
            (NSURLErrorUnknown, "SSL certificate problem: certificate has expired", .tls),
            (NSURLErrorUnknown, "SSL: no alternative certificate subject name matches target host name 'x'", .tls),
            (NSURLErrorServerCertificateUntrusted, "", .tls),
            (NSURLErrorUnknown, "OpenSSL SSL_connect: Connection reset by peer in connection to x:443", .transient),
            (NSURLErrorUnknown, "Header without colon", .transient),
            (NSURLErrorNetworkConnectionLost, "", .transient),
            (NSURLErrorCannotConnectToHost, "Failed to connect to 127.0.0.1 port 1", .transient),
            (NSURLErrorTimedOut, "", .transient),
            // libcurl's limits on a response header (100 KB a line, 300 KB in all): a retry gets the same (issue #48).
            (NSURLErrorUnknown, "Too large response headers: 307217 > 307200", .headerTooLarge),
            (NSURLErrorUnknown, "Out of memory", .headerTooLarge),
        ]
        for (code, message, expected) in cases {
            #expect(TransportError.kind(domain: NSURLErrorDomain, code: code, message: message) == expected, "\(code)")
        }
        let url = URL(string: "https://example.com/a")!
        let lost = TransportError.failure(
            NSError(domain: NSURLErrorDomain, code: NSURLErrorNetworkConnectionLost), url: url)
        #expect(lost == .connectionFailed && lost.isTransient)
        #expect((lost.underlyingError as? URLError)?.code == .networkConnectionLost)
        let unknown = TransportError.failure(
            NSError(
                domain: NSURLErrorDomain, code: NSURLErrorCannotFindHost,
                userInfo: [NSLocalizedDescriptionKey: "Could not resolve host: nosuchhost.invalid"]), url: url)
        #expect(unknown == .hostNotFound && !unknown.isTransient)
        #expect((unknown.underlyingError as? URLError)?.code == .cannotFindHost)
        #expect(unknown.reason.contains("Could not resolve host") && unknown.reason.contains("DNS"))
        // `unsupportedURL` is a URL URLSession refuses (permanent), or libcurl's "HTTP/0.9": an answer without a status
        // line, mostly bytes left on a reused connection (transient: libcurl closes it).
        func unsupported(_ message: String) -> DownloadError {
            TransportError.failure(
                NSError(
                    domain: NSURLErrorDomain, code: NSURLErrorUnsupportedURL,
                    userInfo: [NSLocalizedDescriptionKey: message]), url: url)
        }
        let notHTTP = unsupported("Received HTTP/0.9 when not allowed")
        #expect(notHTTP == .connectionFailed && notHTTP.isTransient && notHTTP.reason.contains("not an HTTP answer"))
        let refused = unsupported("Port number was not a decimal number between 0 and 65535")
        #expect(refused == .invalidURL && !refused.isTransient)
    }

    @Test("HTTP statuses: 408, 429 and 5xx are transient; other 4xx are permanent")
    func statuses() {
        let url = URL(string: "https://example.com/a")!
        for status in [408, 429, 500, 502, 503, 504] { #expect(DownloadError.httpStatus(status, url: url).isTransient) }
        for status in [400, 401, 403, 404, 410, 416, 451] {
            #expect(!DownloadError.httpStatus(status, url: url).isTransient)
        }
        #expect(!DownloadError.tooManyRedirects(url, reason: "loop").isTransient)
        #expect(!DownloadError.unsupportedScheme(url).isTransient)
    }

    @Test(
        "An untrusted certificate fails at once, not after the retries, with libcurl's reason, the next step and the URLError",
        .enabled(if: TLSServer.isAvailable))
    func untrustedCertificate() async throws {
        let tls = try await onThread { try TLSServer() }  // key generation and a wait: off the cooperative threads
        defer { tls.stop() }
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let configuration = DownloadManager.Configuration.forTests(directory: directory.url, retryLimit: 5)
        let manager = try DownloadManager(configuration: configuration)
        let events = await manager.events()
        let url = URL(string: "https://127.0.0.1:\(tls.port)/file.bin")!
        do {
            _ = try await manager.download(url)
            Issue.record("an untrusted certificate was accepted")
        } catch let error as DownloadError {
            #expect(error == .tlsFailure && !error.isTransient, "\(error)")
            #expect(error.reason.contains("certificate"), "\(error.reason)")
            #expect(error.reason.contains("update-ca-certificates"), "the next step: \(error.reason)")
            #expect(error.underlyingError is URLError, "\(String(describing: error.underlyingError))")
        }
        await manager.shutdown()
        var retries: [String] = []
        for await event in events {
            if case .retrying(_, let attempt, _, let reason) = event { retries.append("retry \(attempt): \(reason)") }
        }
        // One loaded run (right after chaos trials had left hundreds of MB unwritten) retried once: say why.
        #expect(retries.isEmpty, "\(retries)")
    }

    @Test("A stall's and a slow request's reasons give the configured seconds, tenths included (-T 0.5 said 0 s)")
    func stallReasons() {
        let url = URL(string: "http://127.0.0.1:1/a")!
        #expect(DownloadError.stalled(url, seconds: 0.5).reason == "no data for 0.5 s")
        #expect(DownloadError.stalled(url, seconds: 30).reason == "no data for 30 s")
        #expect(DownloadError.stalled(url, seconds: 2.25).reason == "no data for 2.3 s")
        #expect(
            DownloadError.tooSlow(url, bytesPerSecond: 102_400, seconds: 0.2).reason
                == "slower than 102400 bytes/s for 0.2 s")
        #expect(
            DownloadError.tooSlow(url, bytesPerSecond: 1000, seconds: 30).reason == "slower than 1000 bytes/s for 30 s")
    }
}
