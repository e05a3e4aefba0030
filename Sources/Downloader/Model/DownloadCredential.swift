import Foundation

/// A user name and password for a host that asks for HTTP Basic authentication
/// (`DownloadManager.Configuration.credentials`).
///
/// Kept in memory only: no credential reaches the journal, a partial file's state or an extended attribute. A request
/// goes out without it; a `401` whose `WWW-Authenticate` offers `Basic` is sent again once with it, and later requests
/// to that host carry it from the start. It never goes to another host, also not on a redirect. Digest, NTLM and
/// Negotiate are not answered (the `401` fails the download and its message names the scheme the server asked for).
public struct DownloadCredential: Sendable, Hashable {
    /// The user name.
    public var user: String
    /// The password.
    public var password: String

    /// Creates a credential.
    /// - Parameters:
    ///   - user: the user name (a `:` in it cannot be sent by Basic authentication).
    ///   - password: the password.
    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    /// The `Authorization` header value for Basic authentication (RFC 7617, UTF-8).
    var basicAuthorization: String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }
}
