import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Refuses redirects so that a test sees the 3xx itself.
final class NoRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}

/// Two sessions for the whole test process. Creating and invalidating a session per request hits a teardown race in
/// swift-corelibs-foundation (#4791, #5469: a crash in `_dispatch_event_loop_drain`).
enum Sessions {
    static let following = URLSession(configuration: .ephemeral)
    static let notFollowing = URLSession(configuration: .ephemeral, delegate: NoRedirects(), delegateQueue: nil)
}

/// One request through URLSession, as a real client would make it.
/// - Parameters:
///   - url: the URL.
///   - method: `GET` or `HEAD`.
///   - headers: request headers.
///   - followRedirects: whether URLSession follows 3xx.
/// - Returns: the response and its (decoded) body.
func fetch(
    _ url: URL, method: String = "GET", headers: [String: String] = [:], followRedirects: Bool = true
) async throws -> (HTTPURLResponse, Data) {
    var request = URLRequest(url: url)
    request.httpMethod = method
    request.timeoutInterval = 30
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    let session = followRedirects ? Sessions.following : Sessions.notFollowing
    return try await withCheckedThrowingContinuation { continuation in
        let task = session.dataTask(with: request) { data, response, error in
            if let error {
                continuation.resume(throwing: error)
            } else if let response = response as? HTTPURLResponse {
                continuation.resume(returning: (response, data ?? Data()))
            } else {
                continuation.resume(throwing: URLError(.badServerResponse))
            }
        }
        task.resume()
    }
}
