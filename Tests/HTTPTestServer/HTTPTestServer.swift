import Dispatch
import Downloader
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A real HTTP/1.1 server on 127.0.0.1 for tests and demos: deterministic bodies, honest Range handling and a
/// catalogue of faults, with a log of what clients sent.
///
/// ```swift
/// let server = try HTTPTestServer()
/// defer { server.stop() }
/// let url = server.url("/bytes/hello?size=100000&drop=5000")
/// ```
///
/// One thread accepts and one thread serves each connection (keep-alive, many at once). Every loop is bounded: the
/// accept loop ends on `stop()`, a connection ends after an idle timeout, `maximumRequestsPerConnection` requests, or
/// `stop()`; stalls and throttling sleep in short slices that `stop()` interrupts. Nothing listens beyond loopback.
public final class HTTPTestServer: Sendable {
    /// The port the kernel chose.
    public let port: Int
    /// `http://127.0.0.1:PORT`.
    public let baseURL: URL

    private let listener: Int32
    private let idleTimeoutSeconds: Int
    private let maximumConnections: Int
    private let maximumRequestsPerConnection: Int
    private let threads = DispatchGroup()
    let state = Locked(State())
    private let gates = Gates()

    struct Waiter: Sendable {
        let id: Int
        let condition: @Sendable (ServerStatistics) -> Bool
        let continuation: CheckedContinuation<Bool, Never>
    }

    struct State: Sendable {
        var statistics = ServerStatistics()
        var stopping = false
        var connections: [Int: Int32] = [:]
        var counters: [String: ResourceCounters] = [:]
        var digests: [TestContent: MD5Digest] = [:]
        var waiters: [Waiter] = []
        var nextWaiterID = 0
        var beforeChunk: (@Sendable (Int, Int) -> Void)?
        /// Answered requests that the next `busyAbove` checks still count (`busyLag=N`): how many checks each has left.
        var lingeringAnswers: [Int] = []
    }

    /// Starts a server on 127.0.0.1 at a free port.
    /// - Parameters:
    ///   - idleTimeoutSeconds: a connection with no request for this long is closed.
    ///   - maximumConnections: connections beyond this many open at once are closed at once.
    ///   - maximumRequestsPerConnection: a keep-alive connection is closed after this many requests.
    /// - Throws: when the socket cannot be created, bound or listened on.
    public init(
        idleTimeoutSeconds: Int = 30, maximumConnections: Int = 1024, maximumRequestsPerConnection: Int = 10_000
    ) throws {
        let (fd, port) = try Socket.listenOnLoopback()
        self.listener = fd
        self.port = port
        self.baseURL = URL(string: "http://127.0.0.1:\(port)")!
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.maximumConnections = maximumConnections
        self.maximumRequestsPerConnection = maximumRequestsPerConnection
        threads.enter()
        let thread = Thread { [self] in
            acceptLoop()
            threads.leave()
        }
        thread.name = "HTTPTestServer.accept"
        thread.start()
    }

    deinit {
        stop()
    }

    /// An absolute URL on this server.
    /// - Parameter pathAndQuery: for example `"/bytes/a?size=10"`.
    public func url(_ pathAndQuery: String) -> URL {
        URL(string: "http://127.0.0.1:\(port)\(pathAndQuery)")!
    }

    /// What the server has observed so far.
    public var statistics: ServerStatistics {
        state.withLock { $0.statistics }
    }

    /// Every request received so far, in order.
    public var requests: [RecordedRequest] { statistics.requests }

    /// Sets what a response to a URL with `paced=1` calls before each chunk of its body (64 KiB at most), on its
    /// connection's thread, with the offset in the resource where the chunk begins and the body bytes this response
    /// sent before it: the test makes the response wait there for an event (its disk catching up). `nil` (the
    /// default) sends at once.
    public func setBeforeChunk(_ hook: (@Sendable (_ offset: Int, _ sent: Int) -> Void)?) {
        update { $0.beforeChunk = hook }
    }

    /// Forgets the request log and the peaks (open connections stay counted).
    public func resetStatistics() {
        state.withLock {
            let open = $0.statistics.openConnections
            let active = $0.statistics.activeRequests
            $0.statistics = ServerStatistics()
            $0.statistics.openConnections = open
            $0.statistics.peakConnections = open
            $0.statistics.activeRequests = active
            $0.statistics.peakActiveRequests = active
        }
    }

    /// Waits until `condition` holds for the server's statistics, re-checked at every request, connection change and
    /// body chunk.
    /// - Parameters:
    ///   - timeout: the deadline (default 60 s: generous, because it only ends a test that would otherwise hang, and
    ///     an instrumented run on a loaded machine is slow).
    ///   - condition: evaluated under the server's lock; keep it quick and side-effect free.
    /// - Returns: `true` when the condition held, `false` when the deadline passed first.
    public func waitUntil(
        timeout: Duration = .seconds(60), _ condition: @escaping @Sendable (ServerStatistics) -> Bool
    ) async -> Bool {
        let id = state.withLock { state -> Int in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let satisfied = state.withLock { state -> Bool in
                if condition(state.statistics) { return true }
                state.waiters.append(Waiter(id: id, condition: condition, continuation: continuation))
                return false
            }
            if satisfied {
                continuation.resume(returning: true)
                return
            }
            Task { [weak self] in
                try? await Task.sleep(for: TestTime.scaled(timeout))
                let expired = self?.state.withLock { state -> Waiter? in
                    guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                    return state.waiters.remove(at: index)
                }
                expired?.continuation.resume(returning: false)
            }
        }
    }

    /// Opens gate `name` (`gate=name`) at once, however many requests have arrived at it: a test holds responses
    /// with a gate that never fills (`gateSize=1000`) and lets them go when it has checked what it wanted.
    public func openGate(_ name: String) {
        gates.open(name)
    }

    /// Stops accepting, closes every connection and waits (up to 10 s) for the server's threads to end. Idempotent.
    public func stop() {
        // Shut connections down under the lock: their threads close them under the same lock, so a descriptor
        // number can never be closed, reused by another socket and then shut down here by mistake.
        let alreadyStopping = state.withLock { state -> Bool in
            defer { state.stopping = true }
            if !state.stopping { for fd in state.connections.values { Socket.shutdownBoth(fd) } }
            return state.stopping
        }
        if alreadyStopping { return }
        gates.wakeAll()
        _ = threads.wait(timeout: .now() + 10)
        Socket.closeDescriptor(listener)
        let waiters = state.withLock { state -> [Waiter] in
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.continuation.resume(returning: waiter.condition(statistics)) }
    }

    /// `stop()` on a thread of its own, for a `deinit`: waiting for the connection threads (up to 10 s) on one of
    /// the few cooperative threads would stall every other test of the suite meanwhile.
    public func stopInBackground() {
        Thread { self.stop() }.start()
    }

    var isStopping: Bool { state.withLock { $0.stopping } }

    /// Applies `change` to the state and resumes the waiters whose condition now holds.
    func update(_ change: (inout State) -> Void) {
        let ready = state.withLock { state -> [Waiter] in
            change(&state)
            guard !state.waiters.isEmpty else { return [] }
            let statistics = state.statistics
            var ready: [Waiter] = []
            state.waiters.removeAll { waiter in
                guard waiter.condition(statistics) else { return false }
                ready.append(waiter)
                return true
            }
            return ready
        }
        for waiter in ready { waiter.continuation.resume(returning: true) }
    }

    // MARK: - Accepting

    private func acceptLoop() {
        while !isStopping {
            var descriptor = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 100)
            guard ready > 0 else { continue }
            guard let fd = Socket.accept(listener, idleTimeoutSeconds: idleTimeoutSeconds) else { continue }
            let id = state.withLock { state -> Int? in
                guard !state.stopping, state.statistics.openConnections < maximumConnections else { return nil }
                let id = state.statistics.connectionsAccepted
                state.connections[id] = fd
                return id
            }
            guard let id else {
                Socket.closeDescriptor(fd)
                continue
            }
            update {
                $0.statistics.connectionsAccepted += 1
                $0.statistics.openConnections += 1
                $0.statistics.peakConnections = max($0.statistics.peakConnections, $0.statistics.openConnections)
            }
            threads.enter()
            let thread = Thread { [self] in
                serve(connection: fd, id: id)
                update {
                    $0.connections[id] = nil
                    $0.statistics.openConnections -= 1
                    Socket.shutdownBoth(fd)
                    Socket.closeDescriptor(fd)
                }
                threads.leave()
            }
            thread.name = "HTTPTestServer.connection.\(id)"
            thread.start()
        }
    }

    // MARK: - Serving one connection

    private func serve(connection fd: Int32, id: Int) {
        var buffer: [UInt8] = []
        for _ in 0..<maximumRequestsPerConnection {
            guard let head = readHead(fd, buffer: &buffer) else { return }
            update {
                let index = $0.statistics.requests.count
                $0.statistics.requests.append(
                    RecordedRequest(
                        index: index, connectionID: id, method: head.method, target: head.target,
                        headers: head.headers))
                $0.statistics.activeRequests += 1
                $0.statistics.peakActiveRequests = max($0.statistics.peakActiveRequests, $0.statistics.activeRequests)
            }
            if var busy = busyAnswer(to: head) {
                // A refused request stops counting before its answer leaves (nginx's `limit_conn` never counts it): a
                // client that asks again at once must not meet it, however late this thread runs after the write.
                update { $0.statistics.activeRequests -= 1 }
                busy.omitBody = head.method == "HEAD"  // as `Router.respond` does: a body would poison the connection
                let keepOpen = write(busy, to: fd) && head.keepAlive
                if !keepOpen || isStopping { return }
                continue
            }
            let response = Router.respond(
                to: head, port: port,
                counters: { key in
                    self.state.withLock { state in
                        let before = state.counters[key, default: ResourceCounters()]
                        state.counters[key, default: ResourceCounters()].all += 1
                        if head.method == "GET" { state.counters[key, default: ResourceCounters()].gets += 1 }
                        return before
                    }
                },
                digest: digest(of:),
                fireDrop: { key in
                    self.state.withLock { state in
                        defer { state.counters[key, default: ResourceCounters()].drops += 1 }
                        return state.counters[key, default: ResourceCounters()].drops
                    }
                },
                fireStall: { key in
                    self.state.withLock { state in
                        defer { state.counters[key, default: ResourceCounters()].stalls += 1 }
                        return state.counters[key, default: ResourceCounters()].stalls
                    }
                },
                fireAbort: { key in
                    self.state.withLock { state in
                        defer { state.counters[key, default: ResourceCounters()].aborts += 1 }
                        return state.counters[key, default: ResourceCounters()].aborts
                    }
                })
            // A request the busy model counts (`busyAbove`) stops counting just before its last bytes leave, so that
            // a client that asks again as soon as it has them meets exactly `busyLag` more counts of it, however late
            // this thread runs after the write (a paced response pauses after its last chunk).
            var ended = false
            let finishing: (() -> Void)? =
                head.query["busyAbove"] == nil
                ? nil
                : {
                    ended = true
                    self.endAnswer(head)
                }
            let keepOpen =
                write(response, to: fd, beforeLastBytes: finishing) && head.keepAlive && !response.closeAfter
                && !response.omitLength
            if !ended { endAnswer(head) }
            if !keepOpen || isStopping { return }
            if let bytes = response.bytesAfterNextRequest {
                guard waitForData(on: fd, seconds: Self.longestLeftoverWait), Socket.sendAll(fd, bytes) else { return }
            }
        }
    }

    private func digest(of content: TestContent) -> MD5Digest {
        if let cached = state.withLock({ $0.digests[content] }) { return cached }
        let digest = content.md5
        state.withLock { $0.digests[content] = digest }
        return digest
    }

    // MARK: - Writing a response

    /// Writes a response with its fault options.
    /// - Parameter beforeLastBytes: called once, just before the response's last bytes are sent (its head's, when it
    ///   has no body); not called when the response ends before them.
    /// - Returns: `false` when the connection must be closed (the peer left, or a fault closes it).
    private func write(_ response: Response, to fd: Int32, beforeLastBytes: (() -> Void)? = nil) -> Bool {
        if response.abort { return false }
        if let raw = response.raw {
            _ = Socket.sendAll(fd, raw)
            return false
        }
        if let gate = response.gate {
            guard gates.pass(gate.name, size: gate.size, isStopping: { self.isStopping }) else { return false }
        }
        let total = response.body.count
        let limit = response.dropAfter.map { min($0, total) } ?? total
        if response.omitBody || limit == 0 { beforeLastBytes?() }
        guard Socket.sendAll(fd, response.head()) else { return false }
        if response.omitBody { return true }
        let chunkCapacity = response.unfilled ? 1 << 20 : 65_536
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkCapacity, alignment: 8)
        defer { buffer.deallocate() }
        if response.unfilled, case .content(let content, _) = response.body { content.fill(buffer, from: 0) }
        let started = DispatchTime.now().uptimeNanoseconds
        var sent = 0
        var stalled = false
        let bodyStart: Int
        if case .content(_, let range) = response.body { bodyStart = range.lowerBound } else { bodyStart = 0 }
        let beforeChunk = response.paced ? state.withLock { $0.beforeChunk } : nil
        while sent < limit {
            beforeChunk?(bodyStart + sent, sent)
            if let stall = response.stall, !stalled, sent >= stall.after {
                stalled = true
                update { $0.statistics.stallsBegun += 1 }
                if let gate = response.stallGate {
                    guard gates.pass(gate, size: 1000, isStopping: { self.isStopping }) else { return false }
                } else {
                    guard pause(seconds: stall.seconds, watching: fd) else { return false }
                }
            }
            var count = min(chunkCapacity, limit - sent)
            if let rate = response.bytesPerSecond { count = min(count, max(1, rate / 50)) }
            if let stall = response.stall, !stalled, stall.after > sent { count = min(count, stall.after - sent) }
            if let trickle = response.trickleAfter { count = min(count, trickle > sent ? trickle - sent : 16) }
            let chunk = UnsafeMutableRawBufferPointer(rebasing: buffer[..<count])
            switch response.body {
            case .none: return true
            case .bytes(let bytes):
                bytes.withUnsafeBytes {
                    chunk.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[sent..<sent + count]))
                }
            case .content where response.unfilled:
                break  // the block filled once
            case .content(let content, let range):
                content.fill(chunk, from: range.lowerBound + sent)
            }
            if sent + count == limit { beforeLastBytes?() }
            guard Socket.sendAll(fd, UnsafeRawBufferPointer(chunk)) else { return false }
            sent += count
            update { $0.statistics.bodyBytesSent += Int64(count) }
            if let trickle = response.trickleAfter, sent > trickle {
                guard pause(seconds: 0.01, watching: fd) else { return false }
            }
            if let rate = response.bytesPerSecond {
                let due = started + UInt64(Double(sent) / Double(rate) * 1e9)
                let now = DispatchTime.now().uptimeNanoseconds
                if due > now { guard pause(seconds: Double(due - now) / 1e9, watching: fd) else { return false } }
            }
        }
        if response.dropAfter != nil || response.omitLength || (response.announcedLength ?? total) != total {
            return false
        }
        return true
    }
}
