import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `--on-complete CMD`: after each verified file, `/bin/sh -c 'CMD "$1"' dl PATH` — the file's path is the command's
/// last argument, passed as a positional parameter, so no file name is ever read as shell syntax — with `DL_PATH`,
/// `DL_URL` (credentials removed) and `DL_CHECKSUM` (`sha-256=…`, when hashed) in its environment, as aria2's
/// `--on-download-complete`. Commands run one at a time, in the order files complete, while downloads go on; a
/// failing one is reported on stderr and changes nothing else (not the exit status).
actor CompletionHook {
    private let command: String
    private var last: Task<Void, Never>?
    private let report: @Sendable (String) -> Void

    init(command: String, report: @escaping @Sendable (String) -> Void) {
        self.command = command
        self.report = report
    }

    /// Queues the command for one verified file.
    func run(path: String, url: URL, checksum: String?) {
        let previous = last
        let command = command
        let report = report
        last = Task.detached {
            await previous?.value
            var environment = ProcessInfo.processInfo.environment
            environment["DL_PATH"] = path
            environment["DL_URL"] = url.withoutCredentials.absoluteString
            environment["DL_CHECKSUM"] = checksum
            let arguments = ["/bin/sh", "-c", command + " \"$1\"", "dl", path]
            let variables = environment.map { "\($0.key)=\($0.value)" }
            // On a thread of its own: waiting for the command must not hold one of the few threads the downloads run on.
            let status = await withCheckedContinuation { continuation in
                Thread.detachNewThread { continuation.resume(returning: Self.spawn(arguments, environment: variables)) }
            }
            switch status {
            case .failedToStart(let code):
                report("dl: --on-complete could not start /bin/sh for \(path): \(String(cString: strerror(code)))")
            case .exited(0):
                break
            case .exited(let code):
                report("dl: --on-complete failed for \(path) (exit status \(code))")
            case .signalled(let signal):
                report("dl: --on-complete failed for \(path) (signal \(signal))")
            }
        }
    }

    enum Status: Sendable { case failedToStart(Int32), exited(Int32), signalled(Int32) }

    #if os(Linux)
        /// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34), looked up by name: the Glibc module does not
        /// export it.
        private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        private static let closeFrom: CloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map {
            unsafeBitCast($0, to: CloseFrom.self)
        }
    #endif

    /// Runs `arguments` with `posix_spawn(2)` (stdin from `/dev/null`, stdout and stderr shared with `dl`) and waits
    /// on this thread. Not Foundation's `Process`: its `run()` can crash the process on Swift 6.3 (an over-read of
    /// `/proc/self/fd`, swift-corelibs-foundation PR #5472).
    static func spawn(_ arguments: [String], environment: [String]) -> Status {
        #if canImport(Darwin)
            var actions: posix_spawn_file_actions_t? = nil  // a pointer the call below sets
        #else
            var actions = posix_spawn_file_actions_t()
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        // dl's sockets and partial files are not the command's (`Process` closes them too).
        #if os(Linux)
            if let closeFrom = Self.closeFrom { _ = closeFrom(&actions, 3) }
            var attributes = posix_spawnattr_t()
        #elseif canImport(Darwin)
            var attributes: posix_spawnattr_t? = nil
        #endif
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        #if canImport(Darwin)
            // Every descriptor closed but the three given: Darwin's way of closefrom(3).
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_CLOEXEC_DEFAULT))
            posix_spawn_file_actions_addinherit_np(&actions, 1)
            posix_spawn_file_actions_addinherit_np(&actions, 2)
        #endif
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid = pid_t()
        let result = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard result == 0 else { return .failedToStart(result) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7f
        return signal != 0 ? .signalled(signal) : .exited((status >> 8) & 0xff)
    }

    /// Waits for every queued command.
    func finish() async {
        await last?.value
    }
}
