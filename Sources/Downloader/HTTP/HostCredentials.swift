import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Credentials by origin or host: a value the session asks which credential, if any, a URL has.
struct HostCredentials: Sendable {
    private let byHost: [String: DownloadCredential]

    /// - Parameter byHost: keys are origins (`https://example.com:8443`, `http://example.com`: that scheme, host and
    ///   port only, as curl sends a login given with a URL), a host and port (`example.com:8443`) or host names
    ///   (`example.com`: any port and scheme, as `.netrc` names machines); the most specific wins, and letter case
    ///   does not matter.
    init(_ byHost: [String: DownloadCredential] = [:]) {
        var lowered: [String: DownloadCredential] = [:]
        for (key, credential) in byHost {
            let origin = key.contains("://") ? URL(string: key.lowercased())?.origin : nil
            lowered[origin ?? key.lowercased()] = credential
        }
        self.byHost = lowered
    }

    var isEmpty: Bool { byHost.isEmpty }

    /// The credential for `url`: its origin's first, then its `host:port`'s, then its host's.
    func credential(for url: URL) -> DownloadCredential? {
        guard !byHost.isEmpty, let host = url.host?.lowercased() else { return nil }
        if let credential = byHost[url.origin] { return credential }
        if let port = url.port, let credential = byHost["\(host):\(port)"] { return credential }
        return byHost[host]
    }

    /// The authentication schemes a `401` response offers (`WWW-Authenticate`), lower-cased: `basic`, `digest`, ….
    static func offeredSchemes(_ response: HTTPURLResponse) -> [String] {
        guard let value = response.value(forHTTPHeaderField: "WWW-Authenticate") else { return [] }
        // A challenge starts with a token followed by a space or the end; parameters (`realm="a, b"`) follow it.
        var schemes: [String] = []
        for part in value.split(separator: ",") {
            let trimmed = part.trimmingCharacters(in: .whitespaces)
            guard let token = trimmed.split(separator: " ").first, !token.contains("=") else { continue }
            schemes.append(token.lowercased())
        }
        return schemes
    }
}
