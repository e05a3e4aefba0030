import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// What a server's error page says, for the message (issue #36).
@Suite("Error body")
struct ErrorBodyTests {
    private func summary(_ text: String) -> String? { ErrorBody.summary(of: Data(text.utf8)) }

    @Test("Plain text, HTML, S3's XML and a JSON API: the line a user needs")
    func shapes() {
        #expect(summary("signature expired\nmore\n") == "signature expired")
        #expect(
            summary(
                "<html>\r\n<head><title>403 Forbidden</title></head>\r\n<body>\r\n<center><h1>403 Forbidden</h1>"
                    + "</center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>") == "403 Forbidden")
        #expect(
            summary(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied</Code><Message>Request has "
                    + "expired</Message><X-Amz-Expires>60</X-Amz-Expires></Error>")
                == "AccessDenied: Request has expired")
        #expect(
            summary(#"{"error": {"code": 403, "message": "Signature \"v4\" expired"}}"#) == #"Signature \"v4\" expired"#
        )
        #expect(summary("  \n\n  spaced   out\ttext ") == "spaced out text")
    }

    @Test("A download refused with an error page says what the page said (d1ecfd3: only the status)")
    func inTheMessage() async throws {
        let workspace = try TestWorkspace()
        let manager = try DownloadManager(configuration: .forTests(directory: workspace.directory))
        let error = await #expect(throws: DownloadError.self) {
            try await manager.download(workspace.server.url("/status/403?body=s3"))
        }
        #expect(error?.statusCode == 403)
        #expect(error?.reason.contains("“AccessDenied: Request has expired”") == true, "\(error!)")
        let plain = await #expect(throws: DownloadError.self) {
            try await manager.download(workspace.server.url("/status/404"))
        }
        #expect(plain?.reason.hasSuffix("“status 404”") == true, "\(plain!)")
        await manager.shutdown()
    }

    @Test("Control characters are escaped, long lines cut, binary and empty bodies say nothing")
    func hostile() {
        #expect(summary("bad\u{1b}[31mred\u{7}") == "bad\\u{1b}[31mred\\u{7}")
        let long = summary(String(repeating: "x", count: 1000))
        #expect(long?.count == ErrorBody.maximumLength && long?.hasSuffix("…") == true)
        #expect(ErrorBody.summary(of: Data([0x1f, 0x8b, 0, 0, 3])) == nil)
        #expect(summary("") == nil && summary(" \n ") == nil)
    }
}
