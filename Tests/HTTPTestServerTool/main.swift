// http-test-server: the in-process test server as a standalone process, for scripts (Tests/Reliability).
//
//   http-test-server [--seconds N]
//
// Prints the port on the first line of stdout, then serves on 127.0.0.1 until stdin closes, SIGTERM, or N seconds
// (default 3600) have passed: it never outlives its script by long.
import Foundation
import HTTPTestServer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

if CommandLine.arguments.contains("--help") || CommandLine.arguments.contains("-h") {
    print(
        """
        usage: http-test-server [--seconds N]

        The in-process test server (Tests/HTTPTestServer) as a process of its own, for scripts: it prints its port on
        the first line of stdout, then serves on 127.0.0.1 until stdin closes, SIGTERM, or N seconds (default 3600)
        have passed. Its routes and options (/bytes/NAME?size=N&…) are in Tests/HTTPTestServer/README.md.
        """)
    exit(0)
}
var seconds = 3600.0
if let index = CommandLine.arguments.firstIndex(of: "--seconds"), index + 1 < CommandLine.arguments.count {
    seconds = Double(CommandLine.arguments[index + 1]) ?? seconds
}
let server = try HTTPTestServer()
print(server.port)
fflush(nil)
let deadline = Date().addingTimeInterval(seconds)
let stdinClosed = DispatchSemaphore(value: 0)
Thread {
    _ = FileHandle.standardInput.readDataToEndOfFile()
    stdinClosed.signal()
}.start()
while Date() < deadline {
    if stdinClosed.wait(timeout: .now() + 1) == .success { break }
}
server.stop()
