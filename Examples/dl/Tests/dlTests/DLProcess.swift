import Downloader
import Foundation
import HTTPTestServer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The `dl` binary built next to the test bundle, run as a child process.
final class DLProcess: @unchecked Sendable {
    struct Outcome: Sendable {
        let status: Int32
        let stderr: String
        /// stdout as bytes (`dl -O -` writes a file's bytes there).
        var stdoutData = Data()
        /// stdout as text, decoded when asked: decoding a streamed file of tens of MiB held a cooperative thread
        /// for a minute in a debug build.
        var stdout: String { String(decoding: stdoutData, as: UTF8.self) }

        var lines: [String] { stdout.split(separator: "\n").map(String.init) }
    }

    /// `DL_BINARY` when set (CI points it at the release build), else the `dl` built next to the test bundle.
    static var binary: URL {
        if let path = ProcessInfo.processInfo.environment["DL_BINARY"], !path.isEmpty {
            return URL(fileURLWithPath: path).standardizedFileURL
        }
        return built("dl")
    }

    /// An executable of this package built next to the test bundle.
    static func built(_ name: String) -> URL {
        BuiltProducts.url(name)
    }

    /// An environment in which a signal's clean stop may take a minute (`DL_STOP_DEADLINE`), for tests that check
    /// the clean stop's message or state on a machine that may stall for seconds.
    static let patientStop = ["DL_STOP_DEADLINE": "60"]

    private let process: SpawnedProcess

    /// Starts `dl` (or another executable) with `arguments` in `directory`.
    init(
        _ arguments: [String], in directory: URL, executable: URL = DLProcess.binary,
        environment: [String: String]? = nil, inputPipe: Bool = false
    ) throws {
        // Tests hold a download mid-transfer with a server that pauses after some bytes; a whole first request would
        // be cut short there and go on without the pause (`FirstRequestBudget`), so dl runs with 16 KiB first
        // requests unless a test asks for the default (library tests cover the cut).
        let environment = ProcessInfo.processInfo.environment.merging(["DL_FIRST_REQUEST_CUT": "0"]) { $1 }
            .merging(environment ?? [:]) { $1 }
        // Not Foundation's `Process`: its `run()` crashes the test runner now and then on Swift 6.3 (see there).
        process = try SpawnedProcess(
            executable: executable, arguments: arguments, environment: environment, directory: directory,
            inputPipe: inputPipe)
    }

    /// Writes to its stdin (started with `inputPipe`).
    func writeInput(_ text: String) { process.writeInput(text) }

    /// Ends its stdin.
    func closeInput() { process.closeInput() }

    var pid: Int32 { process.pid }

    /// When the process ended, seen on the thread that reaped it (`nil` while it runs): a time the test's own
    /// scheduling does not stretch.
    var exitInstant: ContinuousClock.Instant? { process.exitInstant }

    /// Whether the process has not exited yet (signal it only then: once reaped, its pid may be another process's).
    var isRunning: Bool { process.isRunning }

    /// Waits until the process has written `text` to stderr, or the deadline passed (then `false`). Output is an
    /// event the process causes; the short polls only bound how soon it is noticed.
    func waitForStderr(containing text: String, timeout: Duration = .seconds(20)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if String(decoding: process.output.stderr, as: UTF8.self).contains(text) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        // Once more: a wake-up that came late (a busy machine) must not miss what arrived meanwhile.
        return String(decoding: process.output.stderr, as: UTF8.self).contains(text)
    }

    /// Waits until the process has written `text` to stdout, or the deadline passed (then `false`).
    func waitForStdout(containing text: String, timeout: Duration = .seconds(60)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if String(decoding: process.output.stdout, as: UTF8.self).contains(text) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return String(decoding: process.output.stdout, as: UTF8.self).contains(text)
    }

    /// Waits until `condition` holds (something the process does, such as a file it writes), or the deadline passed.
    static func waitUntil(timeout: Duration = .seconds(20), _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    /// Waits until the process has printed `count` lines to stdout, or the deadline passed (then `false`).
    func waitForStdout(lines count: Int, timeout: Duration = .seconds(60)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let printed = process.output.stdout.filter { $0 == UInt8(ascii: "\n") }.count
            if printed >= count { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return process.output.stdout.filter { $0 == UInt8(ascii: "\n") }.count >= count
    }

    /// Sends `signal` if the process has not exited: once it is reaped, its pid may be another process's, even a
    /// thread of the test runner's (a `kill` of a thread id signals its whole process).
    func send(_ signal: Int32) {
        process.send(signal)
    }

    /// Sends `signal` from the server's own thread the moment `condition` holds for its statistics, so that no
    /// scheduling delay of the test (seconds, on a loaded machine or under ThreadSanitizer) lets the process run on
    /// past that point.
    /// - Returns: `false` when the condition did not hold before the deadline (nothing was sent).
    func send(
        _ signal: Int32, when server: HTTPTestServer, timeout: Duration = .seconds(60),
        _ condition: @escaping @Sendable (ServerStatistics) -> Bool
    ) async -> Bool {
        return await server.waitUntil(timeout: timeout) { [self] statistics in
            guard condition(statistics) else { return false }
            send(signal)
            return true
        }
    }

    /// Waits for the process to end (on a thread of its own) and returns what it printed.
    func wait() async -> Outcome {
        let process = self.process
        let status = await RawHTTPClient.onThread { process.waitUntilExit() }
        let (out, err) = process.output
        return Outcome(status: status, stderr: String(decoding: err, as: UTF8.self), stdoutData: out)
    }

    /// Runs `dl` to the end.
    static func run(
        _ arguments: [String], in directory: URL, environment: [String: String]? = nil
    ) async throws -> Outcome {
        try await DLProcess(arguments, in: directory, environment: environment).wait()
    }
}
