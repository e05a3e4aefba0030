#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Thin wrappers over the POSIX socket calls the server needs, identical on Linux and macOS.
enum Socket {
    struct Failure: Error, CustomStringConvertible {
        let call: String
        let code: Int32
        var description: String { "\(call) failed: \(String(cString: strerror(code)))" }
    }

    /// A new TCP socket descriptor, or -1.
    static func makeTCPSocket() -> Int32 {
        #if canImport(Darwin)
            return socket(AF_INET, SOCK_STREAM, 0)
        #else
            return socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #endif
    }

    /// The IPv4 address 127.0.0.1:`port` (0 lets the kernel choose when binding).
    static func loopbackAddress(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        #if canImport(Darwin)
            address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    /// Creates a TCP socket listening on 127.0.0.1 at an ephemeral port.
    /// - Returns: the descriptor and the port the kernel chose.
    static func listenOnLoopback(backlog: Int32 = 512) throws -> (fd: Int32, port: Int) {
        let fd = makeTCPSocket()
        guard fd >= 0 else { throw Failure(call: "socket", code: errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))

        var address = loopbackAddress(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw Failure(call: "bind", code: code)
        }
        guard listen(fd, backlog) == 0 else {
            let code = errno
            close(fd)
            throw Failure(call: "listen", code: code)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// Accepts one connection and configures it (no SIGPIPE, no Nagle delay, an idle receive timeout).
    /// - Returns: the connection's descriptor, or `nil` once the listening socket is shut down.
    static func accept(_ listener: Int32, idleTimeoutSeconds: Int) -> Int32? {
        while true {
            #if canImport(Darwin)
                let fd = Darwin.accept(listener, nil, nil)
            #else
                let fd = Glibc.accept(listener, nil, nil)
            #endif
            if fd >= 0 {
                var one: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                #if canImport(Darwin)
                    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
                #endif
                var timeout = timeval(tv_sec: idleTimeoutSeconds, tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                return fd
            }
            if errno == EINTR || errno == ECONNABORTED { continue }
            return nil
        }
    }

    /// Reads what is available, up to `capacity` bytes.
    /// - Returns: the bytes read; empty at end of stream, on error or on the idle timeout.
    static func receive(_ fd: Int32, capacity: Int) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: capacity)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, capacity, 0) }
            if count < 0 && errno == EINTR { continue }
            return count > 0 ? Array(buffer[..<count]) : []
        }
    }

    /// Writes every byte, looping on short writes.
    /// - Returns: `false` when the peer has gone away.
    static func sendAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard var pointer = bytes.baseAddress else { return true }
        var remaining = bytes.count
        #if canImport(Darwin)
            let flags: Int32 = 0
        #else
            let flags = Int32(MSG_NOSIGNAL)
        #endif
        while remaining > 0 {
            let written = send(fd, pointer, remaining, flags)
            if written < 0 {
                if errno == EINTR { continue }
                return false
            }
            pointer += written
            remaining -= written
        }
        return true
    }

    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { sendAll(fd, $0) }
    }

    /// Stops both directions, which wakes any thread blocked on the descriptor.
    static func shutdownBoth(_ fd: Int32) {
        _ = shutdown(fd, Int32(SHUT_RDWR))
    }

    static func closeDescriptor(_ fd: Int32) {
        _ = close(fd)
    }
}
