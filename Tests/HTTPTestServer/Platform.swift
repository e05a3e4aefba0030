import Foundation

/// What the machine running the tests offers, for tests that only one platform can run (`.enabled(if:)`): `/proc`,
/// pidfds, network namespaces and tmpfs mounts are Linux's.
public enum Platform {
    /// Whether the tests run on Linux.
    public static let isLinux: Bool = {
        #if os(Linux)
            return true
        #else
            return false
        #endif
    }()

    /// The advisory locks the kernel holds (`/proc/locks`), for a failing test's message; empty elsewhere.
    public static var lockTable: String {
        #if os(Linux)
            return (try? String(contentsOfFile: "/proc/locks", encoding: .utf8)) ?? ""
        #else
            return ""
        #endif
    }

    /// A process's command line as `ps` shows it (`/proc/PID/cmdline`, NUL-separated); empty elsewhere or when it
    /// has ended.
    public static func commandLine(of pid: Int32) -> String {
        #if os(Linux)
            let data = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))) ?? Data()
            return String(decoding: data, as: UTF8.self)
        #else
            return ""
        #endif
    }
}
