import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A byte-level HTTP/1.1 client for tests: it shows exactly what went over the wire (header spelling, short bodies,
/// early closes), which URLSession hides or, for some faults on Linux before Swift 6.4, crashes on.
public final class RawHTTPClient {
    /// A response as received.
    public struct Reply: Sendable {
        /// The status code, or 0 when no status line arrived.
        public var status: Int
        /// The header lines exactly as sent (`Name: value`, or `Name:value`).
        public var rawHeaderLines: [String]
        /// The body bytes received before the announced length was reached or the connection closed.
        public var body: [UInt8]
        /// Whether the server closed the connection before sending the announced `Content-Length`.
        public var truncated: Bool

        /// The first value of a header, case-insensitively, tolerating a missing space after the colon.
        public func value(forHeader name: String) -> String? {
            for line in rawHeaderLines {
                guard let colon = line.firstIndex(of: ":") else { continue }
                if line[..<colon].caseInsensitiveCompare(name) == .orderedSame {
                    return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
            }
            return nil
        }
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    private let fd: Int32
    private var buffer: [UInt8] = []

    /// Connects to 127.0.0.1 at `port`, with a receive timeout so that no read blocks forever.
    public init(port: Int, timeoutSeconds: Int = 10) throws {
        // The descriptor is stored only once connected: an initializer that throws after every stored property is set
        // runs `deinit`, which closed the descriptor a second time — by then, perhaps, another thread's socket or file.
        fd = try Self.connectedSocket(port: port, timeoutSeconds: timeoutSeconds)
    }

    /// A socket connected to `port` on the loopback; closed again when the connection fails.
    private static func connectedSocket(port: Int, timeoutSeconds: Int) throws -> Int32 {
        let fd = Socket.makeTCPSocket()
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = Socket.loopbackAddress(port: port)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw Failure(description: "connect to port \(port): errno \(code)")
        }
        return fd
    }

    deinit {
        close(fd)
    }

    /// Sends a request and reads its response.
    /// - Parameters:
    ///   - method: `GET` or `HEAD`.
    ///   - target: path and query.
    ///   - headers: extra header lines.
    /// - Returns: the reply; a body is read only for non-HEAD requests.
    public func send(_ method: String = "GET", _ target: String, headers: [String: String] = [:]) throws -> Reply {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        guard Socket.sendAll(fd, Array(text.utf8)) else { throw Failure(description: "send failed") }
        return try readReply(hasBody: method != "HEAD")
    }

    /// Reads bytes until `count` are buffered or the connection ends.
    private func fill(upTo count: Int) {
        while buffer.count < count {
            let more = Socket.receive(fd, capacity: 65_536)
            if more.isEmpty { return }
            buffer += more
        }
    }

    private func readReply(hasBody: Bool) throws -> Reply {
        let terminator: [UInt8] = [13, 10, 13, 10]
        while buffer.firstRange(of: terminator) == nil {
            let more = Socket.receive(fd, capacity: 65_536)
            if more.isEmpty { return Reply(status: 0, rawHeaderLines: [], body: buffer, truncated: true) }
            buffer += more
        }
        let end = buffer.firstRange(of: terminator)!
        let lines = String(decoding: buffer[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        buffer.removeSubrange(..<end.upperBound)
        let status =
            lines.first.flatMap { line in line.split(separator: " ").dropFirst().first.flatMap { Int($0) } } ?? 0
        var reply = Reply(status: status, rawHeaderLines: Array(lines.dropFirst()), body: [], truncated: false)
        guard hasBody else { return reply }
        if let length = reply.value(forHeader: "Content-Length").flatMap({ Int($0) }) {
            fill(upTo: length)
            reply.body = Array(buffer.prefix(length))
            buffer.removeFirst(reply.body.count)
            reply.truncated = reply.body.count < length
        } else {
            fill(upTo: Int.max)
            reply.body = buffer
            buffer = []
        }
        return reply
    }
}

extension RawHTTPClient {
    /// Runs blocking socket work on a thread of its own, so that it neither blocks nor is limited by the small
    /// cooperative thread pool of Swift concurrency.
    /// - Parameter body: the blocking work.
    /// - Returns: what `body` returned.
    public static func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: body()) }.start()
        }
    }
}
