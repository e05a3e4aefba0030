import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Credentials by host: a value the session asks which credential, if any, a URL's host has.
struct HostCredentials: Sendable {
    private let byHost: [String: DownloadCredential]

    /// - Parameter byHost: keys are host names (`example.com`) or a host and port (`example.com:8443`, which wins);
    ///   letter case does not matter.
    init(_ byHost: [String: DownloadCredential] = [:]) {
        var lowered: [String: DownloadCredential] = [:]
        for (key, credential) in byHost { lowered[key.lowercased()] = credential }
        self.byHost = lowered
    }

    var isEmpty: Bool { byHost.isEmpty }

    /// The credential for `url`'s host: `host:port` first, then `host`.
    func credential(for url: URL) -> DownloadCredential? {
        guard !byHost.isEmpty, let host = url.host?.lowercased() else { return nil }
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
