import Foundation
import Testing

@testable import Downloader

/// Issue #25: a `DownloadError` matches by kind in `catch` clauses and `switch` cases, where the thrown value is
/// `any Error`.
@Suite("DownloadError pattern matching")
struct DownloadErrorMatchingTests {
    static let url = URL(string: "https://example.test/file")!

    /// Throws `error` as `any Error` and returns which `catch` clause took it.
    static func caught(_ error: any Error) -> String {
        do {
            throw error
        } catch DownloadError.httpStatus {
            return "httpStatus"
        } catch DownloadError.checksumMismatch {
            return "checksumMismatch"
        } catch DownloadError.stalled {
            return "stalled"
        } catch {
            return "other"
        }
    }

    @Test("catch DownloadError.kind takes that kind only; other errors fall through")
    func catchClauses() {
        #expect(Self.caught(DownloadError.httpStatus(404, url: Self.url)) == "httpStatus")
        #expect(Self.caught(DownloadError.checksumMismatch(Self.url, expected: "a", actual: "b")) == "checksumMismatch")
        #expect(Self.caught(DownloadError.stalled(Self.url, seconds: 30)) == "stalled")
        #expect(Self.caught(DownloadError.fileSystem(nil, reason: "full")) == "other")
        #expect(Self.caught(CocoaError(.fileNoSuchFile)) == "other")
        #expect(Self.caught(URLError(.timedOut)) == "other")
    }

    @Test("switch over any Error and over a DownloadError, with the details still there")
    func switchCases() {
        let error: any Error = DownloadError.httpStatus(503, url: Self.url, retryAfter: 7)
        switch error {
        case DownloadError.stalled:
            Issue.record("not a stall")
        case let failure as DownloadError where failure == .httpStatus:
            #expect(failure.statusCode == 503 && failure.retryAfter == 7 && failure.isTransient)
        default:
            Issue.record("not matched: \(error)")
        }
        let typed = DownloadError.tlsFailure(Self.url, reason: "self-signed", underlying: nil)
        switch typed {
        case .httpStatus, .stalled:
            Issue.record("wrong kind")
        case .tlsFailure:
            #expect(!typed.isTransient)
        default:
            Issue.record("not matched: \(typed)")
        }
        #expect(!(DownloadError.httpStatus ~= CocoaError(.fileNoSuchFile)))
    }
}
