import Foundation
import HTTPTestServer
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `downloader-demo` leaves nothing in the temporary folder, however it ends.
@Suite("downloader-demo")
final class DemoTests: Sendable {
    let workspace: TestWorkspace
    var temporary: URL { workspace.directory }

    init() throws {
        workspace = try TestWorkspace(prefix: "demo-tests")
    }

    func start(slowdown: Int = 1) throws -> SpawnedProcess {
        let environment = ProcessInfo.processInfo.environment.merging([
            "TMPDIR": temporary.path, "DOWNLOADER_DEMO_SLOWDOWN": String(slowdown),
        ]) { $1 }
        return try SpawnedProcess(
            executable: BuiltProducts.url("downloader-demo"), arguments: [], environment: environment,
            directory: temporary, inputPipe: false)
    }

    /// Waits for the demo to end (on a thread of its own): its status and stdout.
    func outcome(of demo: SpawnedProcess) async -> (status: Int32, stdout: String) {
        let status = await RawHTTPClient.onThread { demo.waitUntilExit() }
        return (status, String(decoding: demo.output.stdout, as: UTF8.self))
    }

    func leftovers() -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? ["unreadable"]
    }

    @Test("A whole run verifies every file and deletes its workspace")
    func wholeRun() async throws {
        let demo = try start()
        let outcome = await outcome(of: demo)
        #expect(outcome.status == 0, "\(outcome.stdout)\(String(decoding: demo.output.stderr, as: UTF8.self))")
        #expect(outcome.stdout.contains("Every file verified."))
        #expect(leftovers().isEmpty, "\(leftovers())")
    }

    @Test("Ctrl-C in the middle exits 130 and deletes the workspace (over 200 MiB otherwise)")
    func interrupted() async throws {
        // Two hundred times slower (over ten minutes; the signal ends it long before): still running when the
        // signal comes, however loaded the machine. At full speed a loaded machine let it finish before the test
        // looked, and once at twenty times slower (over a minute) too, beside the whole suite and a release build.
        let demo = try start(slowdown: 200)
        // Some bytes are on disk: the workspace exists and holds partial files.
        let deadline = TestTime.deadline(in: .seconds(60))
        func started() -> Bool {
            String(decoding: demo.output.stdout, as: UTF8.self).contains("Downloader demo:") && !leftovers().isEmpty
        }
        while !started() && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(started())
        demo.send(SIGINT)
        let outcome = await outcome(of: demo)
        #expect(outcome.status == 130, "\(outcome.stdout)")
        #expect(leftovers().isEmpty, "\(leftovers())")
    }
}
