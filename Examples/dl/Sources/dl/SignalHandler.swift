import Dispatch
import Downloader
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Turns SIGINT, SIGTERM and SIGHUP (the terminal or ssh session closed) into a clean stop: every download is
/// suspended and the receipts are saved before the process exits with 130, 143 or 129 (128 + the signal), so the same
/// command resumes later. A second signal exits immediately, and so does a stop that has not ended after
/// `stopDeadline` seconds: what is saved then is what `kill -9` would leave, which a rerun continues as well.
final class SignalHandler: @unchecked Sendable {
    /// How long a clean stop may take by default before the process exits anyway (the run must end within 5 s of a
    /// signal).
    ///
    /// The exit cannot cut short a file sync already in the kernel: `_exit` waits for it. A sync waits for the file
    /// system's journal, and so for whatever other programs left unwritten on the same drive; when they keep that
    /// drive busy, the process ends when that sync returns (26 s after the deadline once, on a stalled CI machine).
    static let defaultStopDeadline = 4.0

    /// The deadline `DL_STOP_DEADLINE` asks for: seconds, more than 0 (a drive known to be slow, or tests that check
    /// the clean stop on a machine that stalls); anything else is the default.
    /// - Parameter environment: the process's environment.
    /// - Returns: seconds.
    static func stopDeadline(environment: [String: String]) -> Double {
        guard let text = environment["DL_STOP_DEADLINE"], let seconds = Double(text), seconds > 0, seconds.isFinite
        else { return defaultStopDeadline }
        return seconds
    }

    /// How long this process's clean stop may take.
    private let stopDeadline: Double

    private let manager: DownloadManager
    private let renderer: ProgressRenderer
    private let directory: URL
    private let stateDirectory: URL
    private let lock = NSLock()
    private var stopping = false
    private var sources: [DispatchSourceSignal] = []
    /// Called once the state is saved, before the exit (`--save-cookies`).
    private let onStop: @Sendable () -> Void

    init(
        manager: DownloadManager, renderer: ProgressRenderer, directory: URL, state: URL,
        stopDeadline: Double = defaultStopDeadline, onStop: @escaping @Sendable () -> Void = {}
    ) {
        self.manager = manager
        self.stopDeadline = stopDeadline
        self.onStop = onStop
        self.renderer = renderer
        self.directory = directory
        stateDirectory = state
    }

    /// Whether a signal has started the clean stop.
    var isStopping: Bool {
        lock.lock()
        defer { lock.unlock() }
        return stopping
    }

    func install() {
        for number in [SIGINT, SIGTERM, SIGHUP] {
            let status = 128 + number
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [self] in handle(status: status) }
            source.resume()
            sources.append(source)
        }
    }

    private func handle(status: Int32) {
        lock.lock()
        let second = stopping
        stopping = true
        lock.unlock()
        if second { Self.exitNow(status) }
        // A thread of its own, not Dispatch's pool: threads blocked inside URLSession may hold that pool's few workers.
        Thread.detachNewThread { [self] in
            Thread.sleep(forTimeInterval: stopDeadline)
            guard takeExit() else { return }
            onStop()
            renderer.printError(
                "dl: stopped before every download had settled; what was saved is resumed by the same command")
            Self.exitNow(status)
        }
        Task {
            renderer.freeze()  // the last progress stays on screen
            await manager.shutdown()
            guard takeExit() else { return }
            onStop()
            renderer.printError(Self.stopMessage(directory: directory, state: stateDirectory))
            Self.exitNow(status)
        }
    }

    private var exiting = false

    /// Whether this caller is the one that ends the process (the clean stop or its deadline, whichever comes first).
    private func takeExit() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard !exiting else { return false }
        exiting = true
        return true
    }

    /// Ends the process with `status` once its output is flushed. `_exit`, not `exit`: URLSession's threads may still
    /// be at work, and exit's static destructors must not run under them.
    private static func exitNow(_ status: Int32) -> Never {
        fflush(nil)
        _exit(status)
    }

    /// What a stop says: where the state is and that the same command resumes — and which downloads it cannot
    /// resume (their server sends the whole body in one response: the rerun fetches them again).
    static func stopMessage(directory: URL, state: URL) -> String {
        let whole = DownloadManager.savedDownloads(in: state).downloads.filter { !$0.resumable }
        var message = "dl: stopped; state saved in \(directory.path), run the same command to resume"
        if !whole.isEmpty {
            let names = whole.prefix(3).map { Screen.safe($0.name) }.joined(separator: ", ")
            let more = whole.count > 3 ? " and \(whole.count - 3) more" : ""
            message += " (\(names)\(more) cannot be resumed: the server sends \(whole.count == 1 ? "it" : "them") "
            message += "whole, so the rerun fetches \(whole.count == 1 ? "it" : "them") again)"
        }
        return message
    }

    /// Parks the main flow while the signal task finishes the stop and exits.
    func waitForever() async {
        while true { try? await Task.sleep(for: .seconds(60)) }
    }
}
