import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// `openssl s_server` on 127.0.0.1 with a self-signed certificate made for the test: a real TLS listener that
/// URLSession does not trust.
public final class TLSServer: Sendable {
    /// Whether `/usr/bin/openssl` exists (CI installs it).
    public static let isAvailable = FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")

    /// The port it listens on.
    public let port: Int
    private let pid: pid_t
    private let directory: URL

    /// Makes a key and a self-signed certificate for 127.0.0.1 and starts `openssl s_server -www` with them.
    /// - Throws: when openssl fails or does not accept connections within 20 s.
    public init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tls-server-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let key = directory.appendingPathComponent("key.pem").path
        let certificate = directory.appendingPathComponent("cert.pem").path
        guard
            Self.run([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate, "-days", "1",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            ]) == 0
        else { throw POSIXError(.EINVAL) }
        // The port is free when chosen, not when s_server binds it: another test's server (bound to port 0) may take
        // it in between, and then a connection reaches that server instead (CI once saw a TLS test get an HTTP
        // server's hang-up). Ready means a TLS handshake succeeds; otherwise another port.
        for _ in 1...5 {
            let port = try Self.freePort()
            let pid = try ChildProcess.spawn(
                "/usr/bin/openssl",
                ["s_server", "-accept", "127.0.0.1:\(port)", "-cert", certificate, "-key", key, "-www", "-quiet"])
            if Self.servesTLS(port, pid: pid) {
                (self.port, self.pid) = (port, pid)
                return
            }
            kill(pid, SIGKILL)
            _ = ChildProcess.wait(pid)
        }
        throw POSIXError(.ECONNREFUSED)
    }

    /// Whether `pid` came to serve TLS on `port` within 20 s (a deadline, not a sleep): it accepts a connection and
    /// `openssl s_client` completes a handshake there.
    private static func servesTLS(_ port: Int, pid: pid_t) -> Bool {
        let deadline = Date().addingTimeInterval(20)
        while !accepts(port) {
            guard Date() < deadline, ChildProcess.isRunning(pid) else { return false }
            usleep(20_000)
        }
        return ChildProcess.isRunning(pid) && run(["s_client", "-connect", "127.0.0.1:\(port)", "-brief"]) == 0
    }

    /// Stops the server and removes its key and certificate.
    public func stop() {
        // s_server does not end on SIGTERM while it serves; SIGKILL is immediate.
        kill(pid, SIGKILL)
        _ = ChildProcess.wait(pid)
        try? FileManager.default.removeItem(at: directory)
    }

    private static func run(_ arguments: [String]) -> Int32 {
        guard let pid = try? ChildProcess.spawn("/usr/bin/openssl", arguments) else { return -1 }
        return ChildProcess.wait(pid)
    }

    /// A port nobody listens on now (bound to port 0 and released).
    private static func freePort() throws -> Int {
        let fd = Socket.makeTCPSocket()
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw POSIXError(.EADDRINUSE) }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func accepts(_ port: Int) -> Bool {
        let fd = Socket.makeTCPSocket()
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

/// Child processes without Foundation's `Process` (whose exit monitoring shares libdispatch's manager thread with
/// every other process the tests run): `posix_spawn`, output to /dev/null, `waitpid`.
public enum ChildProcess {
    /// Starts `path` with `arguments`, its stdin, stdout and stderr on /dev/null.
    /// - Returns: the child's pid.
    /// - Throws: `POSIXError` when it cannot be started.
    public static func spawn(_ path: String, _ arguments: [String]) throws -> pid_t {
        #if canImport(Darwin)
            var actions: posix_spawn_file_actions_t? = nil  // a pointer the call below sets
        #else
            var actions = posix_spawn_file_actions_t()
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd: Int32 in [0, 1, 2] {
            posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        // The environment passed as a list (Darwin has no `environ` symbol for Swift).
        let envp = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, nil, argv, envp)
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EINVAL) }
        return pid
    }

    /// Waits for the child to end.
    /// - Returns: its exit status, or 128 + the signal that ended it.
    public static func wait(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// Whether the child has not ended yet (it is not reaped).
    public static func isRunning(_ pid: pid_t) -> Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == 0
    }
}
