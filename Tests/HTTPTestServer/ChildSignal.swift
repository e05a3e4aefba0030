import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Signals one child process and never another: a pid names a process only until it is reaped (Foundation reaps its
/// children itself), and then may name any new process — even a thread of the test runner, whose whole process a
/// `kill` of its thread id signals. On Linux a pidfd, opened right after the child was started, names that process
/// for good (`pidfd_open(2)`, `pidfd_send_signal(2)`); elsewhere, `kill` while the process still runs.
public final class ChildSignal: @unchecked Sendable {
    private let pid: Int32
    private let isRunning: @Sendable () -> Bool
    private let pidfd: Int32

    #if os(Linux)
        private typealias Open = @convention(c) (Int32, UInt32) -> Int32
        private typealias Send = @convention(c) (Int32, Int32, UnsafeMutableRawPointer?, UInt32) -> Int32
        private static let open: Open? = dlsym(nil, "pidfd_open").map { unsafeBitCast($0, to: Open.self) }
        private static let send: Send? = dlsym(nil, "pidfd_send_signal").map { unsafeBitCast($0, to: Send.self) }
    #endif

    /// Call right after `process.run()`.
    public convenience init(_ process: Process) {
        self.init(pid: process.processIdentifier, isRunning: { process.isRunning })
    }

    /// Call right after the child with `pid` was started, before anything can reap it.
    public init(pid: Int32, isRunning: @escaping @Sendable () -> Bool) {
        self.pid = pid
        self.isRunning = isRunning
        #if os(Linux)
            pidfd = Self.open?(pid, 0) ?? -1
        #else
            pidfd = -1
        #endif
    }

    deinit {
        if pidfd >= 0 { _ = closeDescriptor(pidfd) }
    }

    /// Sends `signal` to the child if it has not exited.
    public func send(_ signal: Int32) {
        #if os(Linux)
            if pidfd >= 0, let send = Self.send {
                _ = send(pidfd, signal, nil, 0)
                return
            }
        #endif
        if isRunning() { kill(pid, signal) }
    }
}

/// Executables of this package, built next to the test bundle.
public enum BuiltProducts {
    /// The executable called `name` in the test bundle's build folder.
    public static func url(_ name: String) -> URL {
        var testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        #if canImport(Darwin)
            // Under Xcode's xctest or swiftpm-testing-helper, argv[0] is the runner, not the test bundle: ask for the
            // bundle that was loaded.
            if let bundle = Bundle.allBundles.first(where: { $0.bundleURL.pathExtension == "xctest" }) {
                testBinary = bundle.bundleURL.appendingPathComponent("Contents/MacOS/x")
            }
        #endif
        var directory = testBinary.deletingLastPathComponent()
        // On macOS the tests run inside an .xctest bundle: step out of it.
        while directory.pathExtension == "xctest" || directory.lastPathComponent == "MacOS"
            || directory.lastPathComponent == "Contents"
        {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent(name)
    }
}

/// `close(2)`, by a name that no method of a type here shares.
private func closeDescriptor(_ fd: Int32) -> Int32 {
    close(fd)
}
