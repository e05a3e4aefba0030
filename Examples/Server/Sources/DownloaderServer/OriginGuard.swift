import Hummingbird

/// Refuses requests that a web page of another origin makes (a browser sends their `Origin`), so that a site the
/// user visits cannot add downloads to a service on their machine; scripts and aria2 clients send no `Origin`.
/// `--rpc-allow-origin-all` (aria2's flag) lets every origin in instead, for web front-ends served elsewhere.
struct OriginGuard<Context: RequestContext>: RouterMiddleware {
    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard let origin = request.headers[.origin] else { return try await next(request, context) }
        let host = request.head.authority ?? ""
        guard origin == "http://\(host)" || origin == "https://\(host)" else {
            return Response(
                status: .forbidden, headers: [.contentType: "text/plain"],
                body: .init(
                    byteBuffer: ByteBuffer(
                        string: "requests from \(origin) are refused (start with --rpc-allow-origin-all to allow)\n")))
        }
        return try await next(request, context)
    }
}
