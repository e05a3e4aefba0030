import Foundation

/// What the server will write for one request: the status line, the headers and a body with its fault options.
struct Response {
    enum Body {
        case none
        case bytes([UInt8])
        case content(TestContent, Range<Int>)

        var count: Int {
            switch self {
            case .none: return 0
            case .bytes(let bytes): return bytes.count
            case .content(_, let range): return range.count
            }
        }
    }

    var status: Int
    var headers: [(String, String)] = []
    var body: Body = .none
    /// Send headers and no body (HEAD), while `Content-Length` still describes the body.
    var omitBody = false
    /// `Content-Length` to announce instead of the body's real length (a short body).
    var announcedLength: Int?
    /// Send no `Content-Length`: the body ends when the connection closes (HTTP/1.1 close-delimited).
    var omitLength = false
    /// Close the connection after this many body bytes.
    var dropAfter: Int?
    /// Body bytes per second; `nil` for as fast as possible.
    var bytesPerSecond: Int?
    /// Pause for `seconds` once `after` body bytes have been sent.
    var stall: (after: Int, seconds: Double)?
    /// With `stall`: pause until this gate opens (`HTTPTestServer.openGate`) instead of for its seconds.
    var stallGate: String?
    /// Once this many body bytes have been sent, send the rest 16 bytes at a time, 100 times a second: a response that
    /// never ends while the client stays, yet keeps the connection busy (unlike a stall).
    var trickleAfter: Int?
    /// Separator between header name and value; `":"` makes the "no space after the colon" fault.
    var headerSeparator = ": "
    /// Close the connection after this response.
    var closeAfter = false
    /// Close the connection without sending anything at all (no status line).
    var abort = false
    /// Send these bytes instead of an HTTP answer (no status line), then close the connection.
    var raw: [UInt8]?
    /// Send these bytes after the answer, once the next request on the connection has arrived (at most
    /// `HTTPTestServer.longestLeftoverWait` later): bytes a buggy server leaves on a keep-alive connection reach the
    /// client before the next answer, whatever the timing.
    var bytesAfterNextRequest: [UInt8]?
    /// Hold the response (before its head) until `size` requests naming this gate have arrived.
    var gate: (name: String, size: Int)?
    /// Before each chunk of the body, call the server's `beforeChunk` hook (a test paces the response by an event).
    var paced = false
    /// Write the body from one block of 1 MiB filled once, as fast as the socket takes it: not the resource's bytes,
    /// a body as fast as a real server's (for an endless body a signal must end).
    var unfilled = false

    init(status: Int, headers: [(String, String)] = [], body: Body = .none) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A short plain-text response.
    static func text(_ status: Int, _ text: String, headers: [(String, String)] = []) -> Response {
        Response(
            status: status, headers: [("Content-Type", "text/plain; charset=utf-8")] + headers,
            body: .bytes(Array(text.utf8)))
    }

    static func reason(for status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 206: return "Partial Content"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 303: return "See Other"
        case 307: return "Temporary Redirect"
        case 308: return "Permanent Redirect"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 408: return "Request Timeout"
        case 410: return "Gone"
        case 416: return "Range Not Satisfiable"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        default: return "Status \(status)"
        }
    }

    /// The status line and headers, `Content-Length` and `Connection` included.
    func head() -> [UInt8] {
        var text = "HTTP/1.1 \(status) \(Response.reason(for: status))\r\n"
        for (name, value) in headers { text += "\(name)\(headerSeparator)\(value)\r\n" }
        if !omitLength { text += "Content-Length\(headerSeparator)\(announcedLength ?? body.count)\r\n" }
        if closeAfter || omitLength { text += "Connection\(headerSeparator)close\r\n" }
        text += "\r\n"
        return Array(text.utf8)
    }
}

extension DateFormatter {
    /// The IMF-fixdate format of HTTP dates, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func httpDate() -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter
    }
}

/// Formats a date as an HTTP date.
func httpDate(_ date: Date) -> String {
    DateFormatter.httpDate().string(from: date)
}
