// downloader-demo: the Downloader library end to end, with no network and no arguments.
//
// Starts an HTTP server on 127.0.0.1, downloads generated files four at a time (the rest wait in the queue), shows
// live progress, suspends one transfer half-way and resumes it by Range, lets one file change on the server during
// its download (If-Range notices and the download restarts cleanly), verifies every MD5 and prints a summary.
import Downloader
import Foundation
import HTTPTestServer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

struct DemoFile {
    let name: String
    let mebibytes: Int
    /// The server's rate for it, in bytes per second.
    let rate: Int
    /// Extra query options for the server (changing content).
    var extra = ""
    var size: Int { mebibytes << 20 }
    /// The query options: the rate, divided by `DOWNLOADER_DEMO_SLOWDOWN` (a whole number, 1 when not set: a test that
    /// interrupts the demo slows it so that it is still running when interrupted, however loaded the machine), and
    /// the extra ones.
    var options: String {
        let slowdown = ProcessInfo.processInfo.environment["DOWNLOADER_DEMO_SLOWDOWN"].flatMap(Int.init) ?? 1
        return "&rate=\(rate / max(1, slowdown))\(extra)"
    }
}

let files = [
    DemoFile(name: "alpha.bin", mebibytes: 8, rate: 20_000_000),
    DemoFile(name: "bravo.bin", mebibytes: 24, rate: 30_000_000),
    DemoFile(name: "charlie.bin", mebibytes: 48, rate: 40_000_000),
    DemoFile(name: "delta.iso", mebibytes: 100, rate: 50_000_000),
    DemoFile(name: "echo.bin", mebibytes: 4, rate: 10_000_000),
    DemoFile(name: "foxtrot.bin", mebibytes: 16, rate: 30_000_000),
    DemoFile(name: "golf.tar", mebibytes: 12, rate: 20_000_000, extra: "&change=2"),  // changes during the download
]
let interrupted = "delta.iso"
let changing = "golf.tar"

let workspace = FileManager.default.temporaryDirectory.appendingPathComponent("downloader-demo-\(getpid())")

/// Deletes the workspace (over 200 MiB) and exits: every way out goes through here — the end, an error, Ctrl-C and
/// SIGTERM — because `exit` skips `defer`.
func leave(_ status: Int32) -> Never {
    for _ in 0..<3 where FileManager.default.fileExists(atPath: workspace.path) {
        try? FileManager.default.removeItem(at: workspace)  // again if a transfer wrote a file meanwhile
    }
    fflush(nil)
    _exit(status)
}

var signalSources: [DispatchSourceSignal] = []
for (number, status) in [(SIGINT, Int32(130)), (SIGTERM, Int32(143))] {
    signal(number, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
    source.setEventHandler { leave(status) }
    source.resume()
    signalSources.append(source)
}

let server: HTTPTestServer
let manager: DownloadManager
do {
    server = try HTTPTestServer()
    var configuration = DownloadManager.Configuration(directory: workspace)
    configuration.maximumActiveDownloads = 4
    configuration.windowSize = 4 << 20
    manager = try DownloadManager(configuration: configuration)
} catch {
    print("downloader-demo: \(error.localizedDescription)")
    leave(1)
}
let urls = files.map { server.url("/bytes/\($0.name)?size=\($0.size)\($0.options)") }
let nameOf = Dictionary(uniqueKeysWithValues: zip(urls, files.map(\.name)))

print(
    "Downloader demo: \(files.count) files, \(files.map(\.mebibytes).reduce(0, +)) MiB from \(server.baseURL), 4 at a time\n"
)

/// What the demo observes, shared between the event loop and the main flow.
final class Observations: @unchecked Sendable {
    let lock = NSLock()
    var receipts: [URL: DownloadReceipt] = [:]
    var started: [URL: Date] = [:]
    var finished: [URL: Date] = [:]
    var log: [String] = []

    func update(_ body: (Observations) -> Void) {
        lock.lock()
        defer { lock.unlock() }
        body(self)
    }
}
let observations = Observations()
let isTerminal = isatty(STDOUT_FILENO) == 1

func bytes(_ count: Int64) -> String { String(format: "%.1f MiB", Double(count) / 1_048_576) }

func render(final: Bool = false) {
    observations.update { o in
        var lines: [String] = []
        for url in urls {
            let name = nameOf[url]!.padding(toLength: 12, withPad: " ", startingAt: 0)
            guard let receipt = o.receipts[url] else {
                lines.append("  \(name) waiting")
                continue
            }
            let filled = Int(receipt.fractionCompleted * 24)
            let bar = String(repeating: "█", count: filled) + String(repeating: "·", count: 24 - filled)
            let speed = receipt.bytesPerSecond.map { String(format: "%6.1f MiB/s", $0 / 1_048_576) } ?? "            "
            let state = receipt.state.rawValue.padding(toLength: 11, withPad: " ", startingAt: 0)
            lines.append(
                "  \(name) \(state) \(bar) \(String(format: "%5.1f%%", receipt.fractionCompleted * 100)) \(speed)")
        }
        if isTerminal {
            print(lines.joined(separator: "\n"))
            if !final { print("\u{1B}[\(lines.count)A", terminator: "") }
        } else if final {
            print(lines.joined(separator: "\n"))
        }
        fflush(nil)  // all output streams; `stdout` itself is a global var Swift 6 will not touch
    }
}

let stream = await manager.events()  // subscribe before anything is queued
let events = Task {
    for await event in stream {
        guard let receipt = event.receipt else { continue }
        observations.update { o in
            o.receipts[receipt.url] = receipt
            if receipt.state == .downloading && o.started[receipt.url] == nil { o.started[receipt.url] = Date() }
            if receipt.state == .completed { o.finished[receipt.url] = Date() }
        }
    }
}
let ticker = Task {
    while !Task.isCancelled {
        render()
        try? await Task.sleep(for: .milliseconds(250))
    }
}

// Queue everything; four start, the rest wait as .queued.
for url in urls { await manager.enqueue(url) }

// Interrupt one transfer half-way, then resume it: the partial file and its MD5 state are kept, and the server sees
// a Range request that starts exactly where the file stopped.
let interruptedURL = urls[files.firstIndex { $0.name == interrupted }!]
let interruptedSize = files.first { $0.name == interrupted }!.size
while await (manager.receipt(for: interruptedURL)?.totalBytesWritten ?? 0) < Int64(interruptedSize / 2) {
    try? await Task.sleep(for: .milliseconds(20))  // polling the demo's own display state, not synchronising a test
}
await manager.suspend(interruptedURL)
try? await Task.sleep(for: .seconds(1))  // let the others run for a moment
let keptBytes = await manager.receipt(for: interruptedURL)?.totalBytesWritten ?? 0
observations.update {
    $0.log.append("suspended \(interrupted) at \(bytes(keptBytes)); its slot went to the next file in the queue")
}
await manager.resume(interruptedURL)
observations.update { $0.log.append("resumed \(interrupted)") }

// Wait for every file.
var results: [URL: Result<DownloadReceipt, any Error>] = [:]
for url in urls {
    do {
        results[url] = .success(try await manager.download(url))
    } catch {
        results[url] = .failure(error)
    }
}
ticker.cancel()
render(final: true)
await manager.shutdown()
events.cancel()

// What the server saw.
let requests = server.requests
let resumedAt = requests.filter { $0.path == "/bytes/\(interrupted)" && $0.method == "GET" }
    .compactMap(\.rangeStart).first { Int64($0) == keptBytes }
let changedGETs = requests.filter { $0.path == "/bytes/\(changing)" && $0.method == "GET" }
let refusedIfRange = changedGETs.contains { $0.value(forHeader: "If-Range") != nil && $0.rangeStart ?? 0 > 0 }

print("")
for line in observations.log { print("• \(line)") }
if let resumedAt {
    print("• the server saw \"Range: bytes=\(resumedAt)-…\" for \(interrupted): nothing was downloaded twice")
}
if refusedIfRange {
    print(
        "• \(changing) changed on the server mid-download: If-Range made the server send the new version whole, and the"
    )
    print("  download restarted cleanly instead of splicing two versions")
}

print("\n  file          size         time       throughput     resumed     MD5")
var allGood = true
for (index, url) in urls.enumerated() {
    let file = files[index]
    switch results[url] {
    case .success(let receipt):
        // golf.tar changes every two GET requests: it ends as whichever version the last response carried.
        let versions = file.name == changing ? Array(0...changedGETs.count) : [0]
        let expected = versions.map { TestContent(name: file.name, size: file.size, version: $0).md5.hexString }
        let ok =
            expected.contains(receipt.md5 ?? "")
            && (try? Hashing.MD5.hash(data: Data(contentsOf: receipt.fileURL)).hexString) == receipt.md5
        allGood = allGood && ok
        let (start, end) = observations.lock.withLock { (observations.started[url], observations.finished[url]) }
        let seconds = max(0.001, (end ?? Date()).timeIntervalSince(start ?? Date()))
        let resumed = url == interruptedURL ? bytes(keptBytes) : "-"
        let columns = [
            file.name.padding(toLength: 12, withPad: " ", startingAt: 0),
            bytes(Int64(file.size)).padding(toLength: 11, withPad: " ", startingAt: 0),
            String(format: "%5.2f s", seconds),
            String(format: "%7.1f MiB/s", Double(file.size) / 1_048_576 / seconds),
            resumed.padding(toLength: 10, withPad: " ", startingAt: 0),
            ok ? "ok" : "MISMATCH",
        ]
        print("  " + columns.joined(separator: "  "))
    case .failure(let error):
        allGood = false
        print("  \(file.name)  failed: \(error)")
    case nil:
        allGood = false
    }
}
print(allGood ? "\nEvery file verified." : "\nSome files failed verification.")
server.stop()
leave(allGood ? 0 : 1)
