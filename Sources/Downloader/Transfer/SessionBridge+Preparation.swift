import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What every request gets before it goes out: the `User-Agent`, the manager's cookies, and the caller's
/// `prepareRequest` hook.
extension SessionBridge {
    /// The request as it goes out: with the `User-Agent`, then through `Configuration.prepareRequest`.
    /// - Returns: the request, or how the request ends (`RequestEnd`) when the hook threw or the task was cancelled.
    func prepare(_ request: URLRequest) async -> Prepared {
        var request = request
        if let userAgent = configuration.userAgent, request.value(forHTTPHeaderField: "User-Agent") == nil {
            request.setValue(userAgent, forHTTPHeaderField: "User-Agent")
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
