import Downloader
import Foundation

/// The Swift snippets of README.md and of the DocC articles, compiled here and run against the test server by
/// `SnippetsTests`.
///
/// The lines between `// README: NAME (PARAMETERS)` and `// README: end` are the README's block, line for line; the
/// README block adds only `import` lines and one `let` line per parameter (a value for the reader's own setting).
/// `SnippetsTests` fails when the two differ.
public enum Snippets {
    /// README, "Quick start": one download with an expected checksum.
    public static func quickStart(directory: URL, url: URL, expectedSHA256: String) async throws -> DownloadReceipt {
        // README: quick-start (directory, url, expectedSHA256)
        let manager = try DownloadManager(configuration: .init(directory: directory))
        let receipt = try await manager.download(
            url, options: DownloadOptions(checksum: try Checksum(parsing: "sha-256=" + expectedSHA256)))
        print(receipt.fileURL.path)  // DIRECTORY/completed/NAME: whole, and verified
        print(receipt.verification!)  // what was checked: sha-256=…
        await manager.shutdown()
        // README: end
        return receipt
    }

    /// README, "Progress of one download": `events(for:)` from before it starts until it ends.
    public static func oneDownload(manager: DownloadManager, url: URL) async throws {
        // README: one-download (manager, url)
        let events = await manager.events(for: url)  // this download's events from now on
        let watcher = Task {
            for await event in events {  // ends when the download completes, fails or is removed
                if case .progress(let r) = event { print(Int(r.fractionCompleted * 100), "%", r.bytesPerSecond ?? 0) }
            }
        }
        _ = try await manager.download(url)  // the receipt, once the file is complete
        await watcher.value
        // README: end
    }

    /// README, "Errors": `catch` by kind.
    public static func errors(manager: DownloadManager, url: URL) async {
        // README: errors (manager, url)
        do {
            let receipt = try await manager.download(url)
            print("saved", receipt.fileURL.path)
        } catch DownloadError.checksumMismatch {
            print("not the file expected: nothing was saved")
        } catch DownloadError.httpStatus {
            print("the server refused")  // 404, 403, … (5xx, 408 and 429 were retried first)
        } catch let error as DownloadError where error.isTransient {
            print("try again later:", error.localizedDescription)  // after Configuration.retryLimit retries
        } catch {
            print(error.localizedDescription)  // the URL and what went wrong
        }
        // README: end
    }

    /// README, "Resume after a restart": a new manager on the same directory continues by Range, with what the first
    /// run asked.
    public static func resume(directory: URL, url: URL) async throws -> DownloadReceipt {
        // README: resume (directory, url)
        let manager = try DownloadManager(configuration: .init(directory: directory))
        print(await manager.receipt(for: url)?.state ?? .idle)  // suspended: found unfinished after a crash or kill -9
        // Continues by Range from the bytes on disk, with what the first run asked: its checksum, naming, headers, …
        let receipt = try await manager.download(url)
        print(receipt.verification!)  // verified sha-256=…: the checksum asked before the restart
        await manager.shutdown()
        // README: end
        return receipt
    }

    /// README, "Logins": a credential for one host, answered when it asks.
    public static func logins(directory: URL, host: String) throws -> DownloadManager {
        // README: logins (directory, host)
        var configuration = DownloadManager.Configuration(directory: directory)
        // Sent when the host answers 401 with a Basic challenge, then with each request to it; never to another host.
        configuration.credentials = [host: DownloadCredential(user: "alice", password: "s3cret")]
        let manager = try DownloadManager(configuration: configuration)
        // README: end
        return manager
    }

    /// README, "Lists of any length": a batch made as it goes, outcomes as downloads end, memory bounded.
    public static func lists(manager: DownloadManager, base: URL, count: Int) async -> (done: Int, failed: Int) {
        // README: lists (manager, base, count)
        // Made as the batch asks for them: a million requests cost the memory of a few thousand.
        let requests = (0..<count).lazy.map { DownloadRequest(base.appendingPathComponent("shard-\($0).tar")) }
        var done = 0
        var failed: [DownloadError] = []
        for await outcome in manager.download(requests) {  // at most 1,000 read and not yet delivered
            switch outcome.result {
            case .success: done += 1  // the file stays where it is; the manager forgets the download
            case .failure(let error): failed.append(error)  // stays known: resume(_:) or the next run continues it
            }
        }
        // README: end
        return (done, failed.count)
    }

    /// Getting started (DocC), "Callbacks": progress and completion closures, and the controls.
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

    /// Getting started (DocC), "More control": an exact destination, a priority, a bandwidth limit, the limit at run time, forget.
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

    /// Using it in a server (DocC), "The manager's side": opened without blocking a thread, interrupted downloads
    /// continued, an id for routes, a snapshot as the body, a logging hook, and the graceful stop.
    /// - Returns: the download's id and the JSON body of its snapshot.
    public static func server(directory: URL, url: URL) async throws -> (id: String, body: Data?) {
        // README: server (directory, url)
        var configuration = DownloadManager.Configuration(directory: directory)
        configuration.continuesInterruptedDownloads = true  // what a SIGTERM or a crash stopped goes on at start
        configuration.directoryLockTimeout = 10  // the previous process may still be saving
        configuration.log = { record in
            // With swift-log: logger.log(level: Logger.Level(rawValue: record.level.rawValue) ?? .info,
            //                            "\(record.message)", metadata: record.metadata.mapValues { .string($0) })
            print(record.level.rawValue, record.message, record.metadata)
        }
        let manager = try await DownloadManager.make(configuration: configuration)

        // POST /downloads {"url": …}: answer with the id the other routes take.
        let receipt = await manager.enqueue(url)
        let id = receipt.identifier

        // GET /downloads/{id}: the snapshot as the body.
        var body: Data?
        if let snapshot = await manager.snapshot(identifiedBy: id) {
            body = try JSONEncoder().encode(snapshot)
            print(String(decoding: body!, as: UTF8.self))
        }

        // At SIGTERM (the service's graceful shutdown): suspended, marked interrupted, saved.
        await manager.shutdown()
        // README: end
        return (id, body)
    }
}
