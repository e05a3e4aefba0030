import Downloader
import Foundation

/// The Swift snippets of README.md, compiled here and run against the test server by `SnippetsTests`.
///
/// The lines between `// README: NAME (PARAMETERS)` and `// README: end` are the README's block, line for line; the
/// README block adds only `import` lines and one `let` line per parameter (a value for the reader's own setting).
/// `SnippetsTests` fails when the two differ.
public enum Snippets {
    /// README, "async/await": a download with an expected checksum, and an events consumer that starts before it
    /// and ends when the manager shuts down.
    public static func asyncAwait(directory: URL, url: URL, expectedSHA256: String) async throws -> DownloadReceipt {
        // README: async-await (directory, url, expectedSHA256)
        let manager = try DownloadManager(configuration: .init(directory: directory))
        let events = await manager.events()  // subscribe first: events are not replayed
        let monitor = Task {
            for await event in events {  // ends when the manager shuts down
                if case .progress(let r) = event { print(r.url.lastPathComponent, r.fractionCompleted) }
            }
        }
        let receipt = try await manager.download(
            url, options: DownloadOptions(checksum: try Checksum(parsing: "sha-256=" + expectedSHA256)))
        print(receipt.fileURL.path, receipt.verification!)  // a whole file, and what was verified
        await manager.shutdown()  // finishes every events() stream
        await monitor.value
        // README: end
        return receipt
    }

    /// README, "Callbacks": progress and completion closures, and the controls.
    public static func callbacks(manager: DownloadManager, url: URL) async {
        // README: callbacks (manager, url)
        await manager.enqueue(
            url,
            progress: { receipt in
                print("\(Int(receipt.fractionCompleted * 100)) %")
            },
            completion: { result in
                switch result {
                case .success(let receipt): print("saved", receipt.fileURL.path)
                case .failure(let error): print(error.localizedDescription)  // the URL and what went wrong
                }
            })
        await manager.suspend(url)  // keeps the partial file and hash state
        await manager.resume(url)  // continues by Range
        await manager.remove(url)  // deletes its files and receipt
        // README: end
    }

    /// README, "More control": an exact destination, a priority, a bandwidth limit, the limit at run time, forget.
    public static func control(manager: DownloadManager, url: URL, destination: URL) async throws -> DownloadReceipt {
        // README: control (manager, url, destination)
        let receipt = try await manager.download(
            url,
            options: DownloadOptions(
                priority: 10,  // starts before waiting downloads of lower priority
                destination: destination,  // this exact file, replaced only by a verified one
                maximumBytesPerSecond: 2 << 20,  // 2 MiB/s on average
                connections: 4))  // four connections at once when the server allows it
        await manager.setMaximumActiveDownloads(8)  // at run time
        await manager.forget(url)  // the file stays; the manager no longer knows the URL
        // README: end
        return receipt
    }
}
