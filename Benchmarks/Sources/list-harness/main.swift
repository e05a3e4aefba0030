// list-harness: what `dl -q -j J -P DIR -i LIST` does with the library, for `valgrind --tool=callgrind`.
//
//   swift build --package-path Benchmarks -c release --product list-harness
//   valgrind --tool=callgrind .build/release/list-harness DIR LIST J
//
// Files in DIR, state in DIR/.dl (removed at the end), `download(_:maximumInFlight:)` over the list, every outcome
// read; it prints "N files in S s (F files/s), K failed". `dl` itself cannot run under valgrind 3.19, nor can a
// program with top-level `await`: their main thread parks in Dispatch's `sigsuspend`, where valgrind dies. Here the
// main thread waits on a semaphore while a detached task (not the main actor's) does the work.
import Downloader
import Foundation

/// A list of URLs through one manager as `dl -q -j J -i LIST` runs it; prints the files per second.
func run(_ arguments: [String]) async throws {
    guard arguments.count >= 3, let active = Int(arguments[2]) else {
        FileHandle.standardError.write(Data("usage: list-harness DIR LIST J\n".utf8))
        exit(2)
    }
    let directory = URL(fileURLWithPath: arguments[0])
    let list = try String(contentsOfFile: arguments[1], encoding: .utf8)
    // As `dl` makes them: each line through `URL.download`, and options that replace the saved tuning.
    var options = DownloadOptions()
    options.replacesSavedTuning = true
    let requests = list.split(separator: "\n").compactMap { try? URL.download(String($0)) }.map {
        DownloadRequest($0, options: options)
    }
    var configuration = DownloadManager.Configuration(directory: directory)
    configuration.completedDirectory = directory
    configuration.stateDirectory = directory.appendingPathComponent(".dl")
    configuration.removesStateWhenFinished = true
    configuration.maximumActiveDownloads = active
    configuration.userAgent = "dl/1.0.0"
    let manager = try DownloadManager(configuration: configuration)
    let started = ContinuousClock.now
    var failed = 0
    for await outcome in manager.download(requests, maximumInFlight: nil) {
        if case .failure(let error) = outcome.result {
            // The first failure is shown: a count alone hid that every file of a run had failed.
            if failed == 0 { FileHandle.standardError.write(Data("list-harness: first failure: \(error)\n".utf8)) }
            failed += 1
        }
    }
    await manager.shutdown()
    let seconds = (ContinuousClock.now - started) / .seconds(1)
    print(
        String(
            format: "%d files in %.3f s (%.0f files/s), %d failed", requests.count, seconds,
            Double(requests.count) / seconds, failed))
}

let done = DispatchSemaphore(value: 0)
let arguments = Array(CommandLine.arguments.dropFirst())
Task.detached {
    do {
        try await run(arguments)
    } catch {
        FileHandle.standardError.write(Data("list-harness: \(error)\n".utf8))
        exit(1)
    }
    done.signal()
}
done.wait()
