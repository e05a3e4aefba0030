// latency-proxy: a TCP relay on loopback that makes a wide-area link out of loopback (issue #24).
//
//   latency-proxy LISTEN_PORT UPSTREAM_PORT RTT_MS RATE_MIB_S
//
// Every accepted connection is relayed to 127.0.0.1:UPSTREAM_PORT. Each direction delays every byte by half the round
// trip, and one rate cap is shared by all connections and both directions' payload (a link, not a per-connection
// throttle). Each direction holds at most the bytes in flight on such a link (rate × RTT, at least 256 KiB): beyond
// that the relay stops reading, as a full link would, so TCP's own flow control sees the round trip. A new
// connection's first bytes wait one round trip more (the handshake the kernel completed at once). Prints the port
// when it listens; runs until killed.
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

let arguments = CommandLine.arguments
guard arguments.count == 5, let listenPort = UInt16(arguments[1]), let upstreamPort = UInt16(arguments[2]),
    let rttMilliseconds = Double(arguments[3]), let rateMiB = Double(arguments[4])
else {
    FileHandle.standardError.write(Data("usage: latency-proxy LISTEN_PORT UPSTREAM_PORT RTT_MS RATE_MIB_S\n".utf8))
    exit(2)
}
let oneWayDelay = rttMilliseconds / 2 / 1000
let bytesPerSecond = rateMiB * 1_048_576
let inFlightLimit = max(256 << 10, Int(bytesPerSecond * rttMilliseconds / 1000))

/// A token bucket shared by every connection: `take(count)` blocks until the link may carry `count` more bytes.
final class Link: @unchecked Sendable {
    private let lock = NSLock()
    private var nextFree = DispatchTime.now().uptimeNanoseconds

    func take(_ count: Int) {
        lock.lock()
        let now = DispatchTime.now().uptimeNanoseconds
        let start = max(now, nextFree)
        nextFree = start + UInt64(Double(count) / bytesPerSecond * 1e9)
        lock.unlock()
        if start > now { usleep(UInt32((start - now) / 1000)) }
    }
}

/// Closes both sockets of a connection once both directions have ended.
final class Pair: @unchecked Sendable {
    private let lock = NSLock()
    private var ended = 0
    let sockets: [Int32]

    init(_ sockets: [Int32]) { self.sockets = sockets }

    func end() {
        lock.lock()
        ended += 1
        let last = ended == 2
        lock.unlock()
        if last { sockets.forEach { close($0) } }
    }
}

/// One direction of one connection: a reader stamps chunks as they arrive, a writer sends each one when its delay has
/// passed and the link has room.
final class Direction: @unchecked Sendable {
    private let condition = NSCondition()
    private var queue: [(due: UInt64, data: [UInt8])] = []
    private var queued = 0
    private var closed = false
    let from: Int32
    let to: Int32
    let link: Link
    let pair: Pair

    init(from: Int32, to: Int32, link: Link, pair: Pair) {
        self.from = from
        self.to = to
        self.link = link
        self.pair = pair
    }

    func start() {
        Thread { self.readLoop() }.start()
        Thread { self.writeLoop() }.start()
    }

    private func readLoop() {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            condition.lock()
            while queued >= inFlightLimit && !closed { condition.wait() }
            condition.unlock()
            let count = read(from, &buffer, buffer.count)
            condition.lock()
            if count <= 0 {
                closed = true
                condition.broadcast()
                condition.unlock()
                return
            }
            let due = DispatchTime.now().uptimeNanoseconds + UInt64(oneWayDelay * 1e9)
            queue.append((due, Array(buffer[0..<count])))
            queued += count
            condition.broadcast()
            condition.unlock()
        }
    }

    private func writeLoop() {
        defer { pair.end() }
        while true {
            condition.lock()
            while queue.isEmpty && !closed { condition.wait() }
            if queue.isEmpty {
                condition.unlock()
                shutdown(to, Int32(SHUT_WR))
                return
            }
            let (due, data) = queue.removeFirst()
            condition.unlock()
            let now = DispatchTime.now().uptimeNanoseconds
            if due > now { usleep(UInt32((due - now) / 1000)) }
            link.take(data.count)
            var sent = 0
            while sent < data.count {
                let written = data[sent...].withUnsafeBytes { write(to, $0.baseAddress, $0.count) }
                if written <= 0 {
                    shutdown(from, Int32(SHUT_RDWR))
                    condition.lock()
                    closed = true
                    condition.broadcast()
                    condition.unlock()
                    return
                }
                sent += written
            }
            condition.lock()
            queued -= data.count
            condition.broadcast()
            condition.unlock()
        }
    }
}

@Sendable func loopback(port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return address
}

// A client that hangs up while a direction is writing to it must end that connection, not the relay.
signal(SIGPIPE, SIG_IGN)
let listener = TCP.socket()
var yes: Int32 = 1
setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
var listenAddress = loopback(port: listenPort)
let bound = withUnsafePointer(to: &listenAddress) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
    }
}
guard bound == 0, listen(listener, 128) == 0 else {
    perror("latency-proxy: bind")
    exit(1)
}
FileHandle.standardOutput.write(Data("\(listenPort)\n".utf8))
let link = Link()
while true {
    let client = accept(listener, nil, nil)
    guard client >= 0 else { continue }
    // The kernel completed the handshake at once; a real link costs a round trip before the first request can go.
    Thread {
        usleep(UInt32(rttMilliseconds * 1000))
        relay(client)
    }.start()
}

@Sendable func relay(_ client: Int32) {
    let upstream = TCP.socket()
    var upstreamAddress = loopback(port: upstreamPort)
    let connected = withUnsafePointer(to: &upstreamAddress) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard connected == 0 else {
        close(client)
        close(upstream)
        return
    }
    var yes: Int32 = 1
    for fd in [client, upstream] { setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(4)) }
    let pair = Pair([client, upstream])
    Direction(from: client, to: upstream, link: link, pair: pair).start()
    Direction(from: upstream, to: client, link: link, pair: pair).start()
}

/// A TCP socket: `SOCK_STREAM` is an `Int32` on Darwin and an enum of Glibc's. (A type's member: a global function of
/// main.swift belongs to the main actor, and the relay threads call it.)
enum TCP {
    static func socket() -> Int32 {
        #if canImport(Darwin)
            return Darwin.socket(AF_INET, SOCK_STREAM, 0)
        #else
            return Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #endif
    }
}
