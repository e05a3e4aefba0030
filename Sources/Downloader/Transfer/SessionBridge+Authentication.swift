import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Basic authentication for hosts with a credential (`DownloadManager.Configuration.credentials`): a request goes out
/// without it; a `401` offering `Basic` ends that request before its sink hears of it, and `perform` sends it again
/// once with the credential. The origin is remembered (in memory only), so its later requests carry the credential
/// from the start. A credential only ever goes to its own host.
extension SessionBridge {
    /// What the session learned about hosts that ask for authentication.
    struct AuthenticationState: Sendable {
        /// Origins that asked: their requests carry the credential from the start.
        var challengedOrigins: Set<String> = []
        /// Requests ended by a challenge that `perform` answers: task identifier → the URL that asked.
        var pending: [Int: URL] = [:]
    }

    /// `request` with the credential of its host when that origin asked for it before, unless it carries credentials
    /// of its own (an `Authorization` header, or a user in the URL).
    func authorizingIfKnown(_ request: URLRequest) -> URLRequest {
        guard !configuration.credentials.isEmpty, request.value(forHTTPHeaderField: "Authorization") == nil,
            let url = request.url, !url.hasCredentials, let credential = configuration.credentials.credential(for: url),
            authentication.withLock({ $0.challengedOrigins.contains(url.origin) })
        else { return request }
        var request = request
        request.setValue(credential.basicAuthorization, forHTTPHeaderField: "Authorization")
        return request
    }

    /// Whether `response` is a challenge this session answers — a `401` offering `Basic`, to a request that carried
    /// no credentials, from a host with a credential — and if so records it for `perform`.
    func takesChallenge(_ response: URLResponse, taskIdentifier id: Int, sentCredentials: Bool) -> Bool {
        guard !sentCredentials, let http = response as? HTTPURLResponse, http.statusCode == 401, let url = http.url,
            configuration.credentials.credential(for: url) != nil,
            HostCredentials.offeredSchemes(http).contains("basic")
        else { return false }
        authentication.withLock { state in
            state.pending[id] = url
            state.challengedOrigins.insert(url.origin)
        }
        return true
    }

    /// The request that answers the challenge recorded for task `id`: `unprepared` sent to the URL that asked (its
    /// origin-bound headers dropped when that is another origin), with that host's credential. `nil` when none was
    /// recorded.
    func answer(toChallengeOf id: Int, for unprepared: URLRequest) -> URLRequest? {
        guard let target = authentication.withLock({ $0.pending.removeValue(forKey: id) }),
            let credential = configuration.credentials.credential(for: target), let original = unprepared.url
        else { return nil }
        var request = unprepared
        request.url = target
        if !RedirectChain.isSameOrigin(target, original) {
            for name in RedirectChain.originBoundHeaders { request.setValue(nil, forHTTPHeaderField: name) }
        }
        request.setValue(credential.basicAuthorization, forHTTPHeaderField: "Authorization")
        return request
    }
}

/// What every request gets before it goes out: the `User-Agent`, the manager's cookies, and the caller's
/// `prepareRequest` hook.
extension SessionBridge {
    /// The request as it goes out: with the `User-Agent`, then through `Configuration.prepareRequest`.
    /// - Returns: the request, or how the request ends (`RequestEnd`) when the hook threw or the task was cancelled.
    func prepare(_ request: URLRequest) async -> Prepared {
        var request = request
        if let userAgent = configuration.userAgent, request.value(forHTTPHeaderField: "User-Agent") == nil {
            request.setPackageField(userAgent, for: "User-Agent")
        }
        if let jar = configuration.cookies, let url = request.url, let cookies = jar.header(for: url) {
            // The caller's own `Cookie` header wins for a name both give.
            request.setValue(
                CookieList.merge(request.value(forHTTPHeaderField: "Cookie"), cookies), forHTTPHeaderField: "Cookie")
        }
        guard let prepare = configuration.prepareRequest else { return .ready(request) }
        do {
            let prepared = try await prepare(request)
            return Task.isCancelled ? .ended(.cancelled) : .ready(prepared)
        } catch let error as DownloadError {
            return .ended(.failed(error))
        } catch {
            if Task.isCancelled { return .ended(.cancelled) }
            return .ended(.failed(.requestPreparationFailed(request.url!, underlying: error)))
        }
    }

    /// A request ready to go out, or how it ended before it did.
    enum Prepared {
        case ready(URLRequest)
        case ended(RequestEnd)
    }
}
