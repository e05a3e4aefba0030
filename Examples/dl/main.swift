// dl: a wget-like downloader built on the Downloader library.
import Downloader
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

func fail(_ message: String, status: Int32) -> Never {
    FileHandle.standardError.write(Data("dl: \(message)\n".utf8))
    exit(status)
}

let arguments: Arguments
do {
    arguments = try Arguments.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("dl: \(error.message)\n\(Arguments.usage)\n".utf8))
    exit(2)
}
if arguments.help {
    print(Arguments.usage)
    exit(0)
}

let directory = URL(fileURLWithPath: arguments.directory, isDirectory: true).standardizedFileURL
var configuration = DownloadManager.Configuration(directory: directory)
configuration.completedDirectory = directory  // finished files land in DIR itself, like wget
configuration.maximumActiveDownloads = arguments.maximumActive
configuration.prioritization = arguments.lifo ? .lifo : .fifo
configuration.retryLimit = arguments.retries

let manager: DownloadManager
do {
    manager = try DownloadManager(configuration: configuration)
} catch {
    fail("\(directory.path): \((error as? DownloadError)?.reason ?? "\(error)")", status: 1)
}
if let recovery = manager.receiptsRecoveryError, !arguments.quiet {
    FileHandle.standardError.write(Data("dl: warning: \(recovery.reason)\n".utf8))
}

if arguments.list {
    for receipt in await manager.allReceipts {
        let total = receipt.totalBytesExpectedToWrite.map(String.init) ?? "?"
        print("\(receipt.state.rawValue)\t\(receipt.totalBytesWritten)/\(total)\t\(receipt.filename)\t\(receipt.url.absoluteString)")
    }
    exit(0)
}

let renderer = ProgressRenderer(
    mode: arguments.quiet ? .quiet : (isatty(STDERR_FILENO) == 1 ? .terminal : .plain))

// Ctrl-C and SIGTERM: suspend everything, save the state, then exit 130 / 143. A second signal exits at once.
let signals = SignalHandler(manager: manager, renderer: renderer, directory: directory)
signals.install()

let stream = await manager.events()  // subscribe before anything is queued, so no state change is missed
let events = Task {
    for await event in stream { renderer.handle(event) }
}

let options = DownloadOptions(
    headers: arguments.headers, expectedMD5: arguments.md5, naming: arguments.naming,
    computesMD5: arguments.computesMD5)
var failures = 0
await withTaskGroup(of: (URL, Result<DownloadReceipt, any Error>).self) { group in
    for url in arguments.urls {
        await manager.enqueue(url, options: options)  // queue in command-line order
        group.addTask {
            do {
                return (url, .success(try await manager.download(url, options: options)))
            } catch {
                return (url, .failure(error))
            }
        }
    }
    for await (url, result) in group {
        switch result {
        case .success(let receipt):
            renderer.printResult(receipt.fileURL.path)
        case .failure(let error):
            if signals.isStopping { continue }
            failures += 1
            let reason = (error as? DownloadError)?.reason ?? "\(error)"
            renderer.printError("dl: \(url.absoluteString): \(reason)")
        }
    }
}
if signals.isStopping { await signals.waitForever() }
await manager.shutdown()
events.cancel()
renderer.finish()
exit(failures > 0 ? 1 : 0)
