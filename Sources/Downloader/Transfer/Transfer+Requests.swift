import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a transfer's requests carry, and where they go.
extension Transfer {
    /// How many bytes before the resume point a request without a strong validator asks for again, to compare: a
    /// change that leaves these bytes equal would go unnoticed (the residual risk, in the Verification article).
    static let continuityCheckLength = 64 << 10

    /// Whether a window sent to the redirect target goes back to the original URL after `error`: 401, 403, 404 and
    /// 410 (an expired signed URL, an object moved on the CDN).
    static func sendsBackToOriginal(_ error: DownloadError) -> Bool {
        guard error == .httpStatus, let status = error.statusCode else { return false }
        return [401, 403, 404, 410].contains(status)
    }

    /// The download's mirrors that can be used: http or https URLs other than the URL itself, each once.
    var mirrors: [URL] {
        var seen: Set<URL> = [url]
        return options.mirrors.filter { mirror in
            (try? mirror.validateForDownload()) != nil && seen.insert(mirror).inserted
        }
    }

    /// What the user is told when a failed request sends the download on to a mirror.
    static func switchingMessage(after error: DownloadError, to mirror: URL) -> String {
        "\(error.localizedDescription); going on from mirror \(mirror.redactedAbsoluteString)"
    }

    /// A GET for the URL with the user's headers and `Accept-Encoding: identity` (a compressed body would break
    /// byte offsets).
    func makeRequest(to target: URL? = nil) -> URLRequest {
        var request = URLRequest(url: target ?? url)
        request.cachePolicy = .reloadIgnoringLocalCacheData
        // Credentials stay with their origin, as on a redirect (`RedirectChain.originBoundHeaders`).
        let sameOrigin = target.map { RedirectChain.isSameOrigin($0, url) } ?? true
        for (name, value) in options.headers
        where sameOrigin
            || !RedirectChain.originBoundHeaders.contains(where: { $0.caseInsensitiveCompare(name) == .orderedSame })
        {
            request.setValue(value, forHTTPHeaderField: name)
        }
        request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        #if !canImport(FoundationNetworking)
            Self.moveUserInfoToAuthorization(&request)
        #endif
        return request
    }

    /// Moves a URL's user and password into an `Authorization: Basic` header, and out of the URL. Apple's URLSession
    /// sends URL credentials only in answer to a `401` (curl, and so Linux's URLSession, send them with the first
    /// request); with the header, both send them at once. The header is origin-bound: a redirect to another origin
    /// drops it (`RedirectChain.originBoundHeaders`). A request with an `Authorization` of its own keeps it.
    static func moveUserInfoToAuthorization(_ request: inout URLRequest) {
        // URLComponents decodes both (URL.password stays percent-encoded on Linux).
        guard let url = request.url, url.hasCredentials,
            let components = URLComponents(url: url, resolvingAgainstBaseURL: false), let user = components.user,
            !user.isEmpty
        else { return }
        if request.value(forHTTPHeaderField: "Authorization") == nil {
            let credential = DownloadCredential(user: user, password: components.password ?? "")
            request.setValue(credential.basicAuthorization, forHTTPHeaderField: "Authorization")
        }
        request.url = url.withoutCredentials
    }
}
