import Foundation

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
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", command + " \"$1\"", "dl", path]
            process.environment = environment
            do {
                try process.run()
            } catch {
                report("dl: --on-complete could not start /bin/sh for \(path): \(error.localizedDescription)")
                return
            }
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    process.waitUntilExit()
                    continuation.resume()
                }
            }
            if process.terminationStatus != 0 {
                let how = process.terminationReason == .uncaughtSignal ? "signal" : "exit status"
                report("dl: --on-complete failed for \(path) (\(how) \(process.terminationStatus))")
            }
        }
    }

    /// Waits for every queued command.
    func finish() async {
        await last?.value
    }
}
