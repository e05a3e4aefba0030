import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A plain TCP connection to the service on loopback, for what an HTTP client will not do: send nothing, or a header
/// a line at a time.
final class RawConnection {
    let descriptor: Int32
    private var received = Data()

    init(port: Int) throws {
        #if canImport(Glibc)
            descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
    }

    deinit {
        close(descriptor)
    }

    /// Sends `text`; `false` when the connection is closed.
    @discardableResult
    func send(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        #if canImport(Glibc)
            let sent = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        #else
            let sent = bytes.withUnsafeBytes { Darwin.send(descriptor, $0.baseAddress, $0.count, 0) }
        #endif
        return sent == bytes.count
    }

    /// Reads until the peer closes, for at most `duration`; whether it closed.
    func readsEndOfStream(within duration: Duration) -> Bool {
        read(until: duration) { $0 == 0 }
    }

    /// Reads until `text` arrived, for at most `duration`; what came up to it is consumed.
    func reads(_ text: String, within duration: Duration) -> Bool {
        let found = read(until: duration) { _ in self.received.range(of: Data(text.utf8)) != nil }
        if let range = received.range(of: Data(text.utf8)) { received.removeSubrange(..<range.upperBound) }
        return found
    }

    private func read(until duration: Duration, _ done: (Int) -> Bool) -> Bool {
        let deadline = ContinuousClock.now + duration
        var buffer = [UInt8](repeating: 0, count: 4096)
        while ContinuousClock.now < deadline {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 50) > 0 else { continue }
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count > 0 { received.append(contentsOf: buffer[..<count]) }
            if done(count) || count == 0 { return done(count) }
            if count < 0 { return true }  // reset: closed too
        }
        return false
    }
}
