import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension HTTPTestServer {
    /// Waits in short slices so that `stop()` interrupts it, watching the connection: when the client hangs up the
    /// pause ends at once, so the request stops counting as active as soon as the client has gone.
    /// - Returns: `false` when the server is stopping or the client closed the connection.
    func pause(seconds: Double, watching fd: Int32) -> Bool {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, seconds) * 1e9)
        while true {
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { break }
            if isStopping { return false }
            let left = deadline - now
            #if os(Linux)
                let pollReadHangUp: Int16 = 0x2000  // POLLRDHUP, a _GNU_SOURCE macro the Glibc module does not export
                let events = pollReadHangUp | Int16(POLLHUP) | Int16(POLLERR)
            #else
                let events = Int16(POLLHUP) | Int16(POLLERR)
            #endif
            var descriptor = pollfd(fd: fd, events: events, revents: 0)
            let ready = poll(&descriptor, 1, Int32(min(left / 1_000_000, 20)))
            if ready > 0 && descriptor.revents != 0 { return false }
        }
        return !isStopping
    }

    /// The longest a connection waits for its next request before bytes left after an answer
    /// (`Response.bytesAfterNextRequest`) are given up with it.
    static let longestLeftoverWait = 30.0

    /// Waits until the client sends something on the connection (its next request), in short slices.
    /// - Returns: `false` when the server is stopping, the client closed the connection, or `seconds` passed first.
    func waitForData(on fd: Int32, seconds: Double) -> Bool {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, seconds) * 1e9)
        while !isStopping, DispatchTime.now().uptimeNanoseconds < deadline {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 20) >= 0 else { return false }
            if descriptor.revents & Int16(POLLIN) != 0 {
                // Readable with nothing to read is the client's end of the connection.
                var byte: UInt8 = 0
                return recv(fd, &byte, 1, Int32(MSG_PEEK)) > 0
            }
            if descriptor.revents != 0 { return false }
        }
        return false
    }
}
