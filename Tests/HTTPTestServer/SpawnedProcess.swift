import Downloader
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A child process for tests, started with `posix_spawn(2)` on Linux: Foundation's `Process.run()` on Swift 6.3
/// over-reads `/proc/self/fd` entries and crashes the test runner now and then (SIGSEGV in
/// `findMaximumOpenFromProcSelfFD`, swift-corelibs-foundation PR #5472, after 6.3.1; 1 of 10 loaded suite runs here).
/// Its stdin is `/dev/null`, stdout and stderr are collected, descriptors above 2 are closed in the child (as
/// `Process` does), and it runs in a session (and process group) of its own, without a controlling terminal. Elsewhere it is a `Process`.
public final class SpawnedProcess: @unchecked Sendable {
    /// How it ended: the exit status, or 128 + the signal that ended it.
    private let ended = Locked<Int32?>(nil)
    /// When it was reaped, taken on the reaping thread: how long it took to end, whatever the test's own threads do.
    private let endedAt = Locked<ContinuousClock.Instant?>(nil)
    private let done = DispatchSemaphore(value: 0)
    private let collected = Locked((stdout: Data(), stderr: Data()))
    private let readersDone = DispatchGroup()
    private var signaller: ChildSignal?
    public private(set) var pid: Int32 = 0
    /// The write end of its stdin, when it was started with `inputPipe`; -1 once closed.
    private let input = Locked<Int32>(-1)

    /// Starts `executable` with `arguments`, `environment` (the whole environment) in `directory`.
    /// - Parameter inputPipe: its stdin is a pipe that `writeInput(_:)` feeds and `closeInput()` ends, instead of
    ///   `/dev/null`.
    /// - Throws: a POSIX error when it cannot be started.
    public init(
        executable: URL, arguments: [String], environment: [String: String], directory: URL, inputPipe: Bool = false
    ) throws {
        #if os(Linux)
            var out: [Int32] = [-1, -1]
            var err: [Int32] = [-1, -1]
            var inp: [Int32] = [-1, -1]
            guard pipe(&out) == 0, pipe(&err) == 0, !inputPipe || pipe(&inp) == 0 else {
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
            for fd in out + err + inp where fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            if inputPipe {
                posix_spawn_file_actions_adddup2(&actions, inp[0], 0)
            } else {
                posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            }
            posix_spawn_file_actions_adddup2(&actions, out[1], 1)
            posix_spawn_file_actions_adddup2(&actions, err[1], 2)
            guard let changeDirectory = Self.changeDirectory else { throw POSIXError(.ENOSYS) }
            _ = changeDirectory(&actions, directory.path)
            if let closeFrom = Self.closeFrom { _ = closeFrom(&actions, 3) }
            var attributes = posix_spawnattr_t()
            posix_spawnattr_init(&attributes)
            defer { posix_spawnattr_destroy(&attributes) }
            // A session of its own (and so a process group of its own): no controlling terminal, so a child that
            // would ask on the terminal (`dl --ask-password`) never prompts on the developer's.
            posix_spawnattr_setflags(&attributes, Int16(Self.spawnSetSession))
            let argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
            let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
            defer { (argv + envp).forEach { free($0) } }
            var child: pid_t = 0
            let result = posix_spawn(&child, executable.path, &actions, &attributes, argv, envp)
            close(out[1])
            close(err[1])
            if inputPipe {
                close(inp[0])
                input.withLock { $0 = inp[1] }
            }
            guard result == 0 else {
                closeInput()
                close(out[0])
                close(err[0])
                throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EIO)
            }
            let spawned = child
            pid = spawned
            signaller = ChildSignal(pid: spawned, isRunning: { [ended] in ended.withLock { $0 == nil } })
            read(out[0], isStdout: true)
            read(err[0], isStdout: false)
            Thread.detachNewThread { [ended, endedAt, done] in
                var status: Int32 = 0
                while waitpid(spawned, &status, 0) < 0 && errno == EINTR {}
                endedAt.withLock { $0 = .now }
                let signalled = (status & 0x7f) != 0
                ended.withLock { $0 = signalled ? 128 + (status & 0x7f) : (status >> 8) & 0xff }
                done.signal()
            }
        #else
            let process = Process()
            process.executableURL = executable
            process.arguments = arguments
            process.environment = environment
            process.currentDirectoryURL = directory
            let out = Pipe()
            let err = Pipe()
            process.standardOutput = out
            process.standardError = err
            if inputPipe {
                let inp = Pipe()
                process.standardInput = inp
                input.withLock { $0 = dup(inp.fileHandleForWriting.fileDescriptor) }
                try? inp.fileHandleForWriting.close()
            } else {
                process.standardInput = FileHandle.nullDevice
            }
            try process.run()
            pid = process.processIdentifier
            signaller = ChildSignal(process)
            // Copies: the reader threads close what they read, and the pipes close their own when they go.
            read(dup(out.fileHandleForReading.fileDescriptor), isStdout: true)
            read(dup(err.fileHandleForReading.fileDescriptor), isStdout: false)
            Thread.detachNewThread { [ended, endedAt, done] in
                process.waitUntilExit()
                endedAt.withLock { $0 = .now }
                let status = process.terminationStatus
                ended.withLock { $0 = process.terminationReason == .uncaughtSignal ? 128 + status : status }
                done.signal()
            }
        #endif
    }

    #if os(Linux)
        /// `POSIX_SPAWN_SETSID` (glibc 2.26), which the Glibc module does not export.
        private static let spawnSetSession: Int32 = 0x80

        /// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34), looked up by name: the Glibc module does not
        /// export it.
        private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        private static let closeFrom: CloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map {
            unsafeBitCast($0, to: CloseFrom.self)
        }
        /// `posix_spawn_file_actions_addchdir_np` (glibc 2.29), likewise.
        private typealias ChangeDirectory =
            @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
        private static let changeDirectory: ChangeDirectory? = dlsym(nil, "posix_spawn_file_actions_addchdir_np").map {
            unsafeBitCast($0, to: ChangeDirectory.self)
        }
    #endif

    /// Collects what the child writes to `fd` until it closes it, on a thread of its own.
    private func read(_ fd: Int32, isStdout: Bool) {
        let collected = self.collected
        readersDone.enter()
        Thread.detachNewThread { [readersDone] in
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                collected.withLock { output in
                    if isStdout {
                        output.stdout.append(contentsOf: buffer[0..<count])
                    } else {
                        output.stderr.append(contentsOf: buffer[0..<count])
                    }
                }
            }
            close(fd)
            readersDone.leave()
        }
    }

    deinit { closeInput() }

    /// Writes `text` to its stdin (started with `inputPipe`). - Returns: `false` when it could not be written whole.
    @discardableResult
    public func writeInput(_ text: String) -> Bool {
        input.withLock { fd in
            guard fd >= 0 else { return false }
            let bytes = Array(text.utf8)
            var offset = 0
            while offset < bytes.count {
                let count = bytes[offset...].withUnsafeBytes { Foundation.write(fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return false }
                offset += count
            }
            return true
        }
    }

    /// Ends its stdin (end of file for the child).
    public func closeInput() {
        input.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
    }

    /// What it wrote so far.
    public var output: (stdout: Data, stderr: Data) { collected.withLock { $0 } }

    /// Whether it has not ended.
    public var isRunning: Bool { ended.withLock { $0 == nil } }

    /// Sends `signal` if it has not ended (never to another process: see `ChildSignal`).
    public func send(_ signal: Int32) {
        signaller?.send(signal)
    }

    /// Blocks until it ended and its output was read to the end.
    /// - Returns: its exit status, or 128 + the signal that ended it.
    /// When the process was seen to end (on the thread that reaped it), once it has.
    public var exitInstant: ContinuousClock.Instant? { endedAt.withLock { $0 } }

    public func waitUntilExit() -> Int32 {
        done.wait()
        done.signal()  // later calls return at once
        readersDone.wait()
        return ended.withLock { $0 } ?? -1
    }
}
