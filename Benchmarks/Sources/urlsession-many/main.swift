// urlsession-many LIST CONCURRENCY: the platform's floor for many small requests (issue #34) — every URL of LIST (one
// per line) fetched by one URLSession with CONCURRENCY data tasks at a time, each body discarded: no disk, no hash,
// no state. Prints the count, the seconds and the files per second; `/usr/bin/time` gives its CPU and memory. The
// difference to `dl -j CONCURRENCY -i LIST` is what dl adds per file (files, state, verification).
// FLOOR_TUNED=1 configures the session as the library does: no cookie storage and accept policy `.never` (corelibs
// then skips parsing each header line as a cookie), no URL cache (it skips looking each request up in it). The default
// configuration pays for both (issue #52).
// FLOOR_WRITES=DIR writes each body to DIR/NAME (the URL's last path component) as the least a downloader that keeps
// files does: `open(O_CREAT|O_EXCL)` at the response, a `write` per chunk, `close` at the end — no temporary name,
// hash, record or sync (curl -O's work; issue #52).
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

final class Runner: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // Touched only on the delegate queue (one operation at a time).
    var pending: IndexingIterator<[URL]>
    var finished = 0
    var failures = 0
    let done = DispatchSemaphore(value: 0)
    var running = 0
    weak var session: URLSession?
    /// FLOOR_WRITES's folder, with a slash; each running task's open file.
    let folder: String?
    var files: [Int: Int32] = [:]

    init(urls: [URL], folder: String?) {
        pending = urls.makeIterator()
        self.folder = folder.map { $0.hasSuffix("/") ? $0 : $0 + "/" }
    }

    func startNext() {
        guard let url = pending.next(), let session else {
            if running == 0 { done.signal() }
            return
        }
        var request = URLRequest(url: url)
        request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        running += 1
        session.dataTask(with: request).resume()
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard let folder else { return }
        var fd = files[dataTask.taskIdentifier] ?? -1
        if fd < 0, let name = dataTask.originalRequest?.url?.lastPathComponent {
            fd = open(folder + name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            files[dataTask.taskIdentifier] = fd
        }
        guard fd >= 0 else { return }
        _ = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        if let fd = files.removeValue(forKey: task.taskIdentifier), fd >= 0 { close(fd) }
        running -= 1
        finished += 1
        if error != nil { failures += 1 }
        startNext()
    }
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let text = try? String(contentsOfFile: arguments[1], encoding: .utf8),
    let concurrency = Int(arguments[2]), concurrency > 0
else {
    FileHandle.standardError.write(Data("usage: urlsession-many LIST CONCURRENCY\n".utf8))
    exit(2)
}
let urls = text.split(separator: "\n").compactMap { URL(string: String($0)) }
let writes = ProcessInfo.processInfo.environment["FLOOR_WRITES"]
if let writes { try FileManager.default.createDirectory(atPath: writes, withIntermediateDirectories: true) }
let runner = Runner(urls: urls, folder: writes)
let queue = OperationQueue()
queue.maxConcurrentOperationCount = 1
let configuration = URLSessionConfiguration.ephemeral
configuration.httpMaximumConnectionsPerHost = concurrency
if ProcessInfo.processInfo.environment["FLOOR_TUNED"] == "1" {
    configuration.httpCookieStorage = nil
    configuration.httpShouldSetCookies = false
    configuration.httpCookieAcceptPolicy = .never
    configuration.urlCache = nil
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
}
let session = URLSession(configuration: configuration, delegate: runner, delegateQueue: queue)
runner.session = session
let start = Date()
queue.addOperation {
    for _ in 0..<concurrency { runner.startNext() }
}
runner.done.wait()
let seconds = Date().timeIntervalSince(start)
print(
    "\(runner.finished) requests, \(runner.failures) failed, \(String(format: "%.2f", seconds)) s, "
        + "\(String(format: "%.0f", Double(runner.finished) / seconds)) per second")
