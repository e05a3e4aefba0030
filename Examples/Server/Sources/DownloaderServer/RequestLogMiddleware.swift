import Hummingbird
import Logging

/// One log line per request: method, path (never the query, which can carry a GET's token), status and
/// milliseconds, at `info`; refusals of the bearer secret at `warning`.
struct RequestLogMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let started = ContinuousClock.now
        func log(_ status: HTTPResponse.Status) {
            let elapsed = ContinuousClock.now - started
            let milliseconds = Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1e3
            let level: Logger.Level = status == .unauthorized ? .warning : .info
            logger.log(
                level: level, "\(request.method) \(request.uri.path) \(status.code)",
                metadata: ["ms": "\(Int(milliseconds.rounded()))"])
        }
        do {
            let response = try await next(request, context)
            log(response.status)
            return response
        } catch let error as HTTPResponseError {
            log(error.status)
            throw error
        } catch {
            log(.internalServerError)
            throw error
        }
    }
}
