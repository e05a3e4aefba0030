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
// FLOOR_DURABLE=1 (with FLOOR_WRITES) adds, by hand and on the delegate's queue (no hop), the file-system calls the
// library makes for each small file so that no crash can leave a wrong file (issue #52): two looks for an earlier
// delivery (`open` of the final name, which fails), a look for saved state (`stat`), the partial file created under a
// temporary name in DIR/.state with `O_EXCL`, the origin URL as an extended attribute, a `stat` of the partial file
// before the move, the download's record as a second attribute, the journal's placement line (a `write(2)` of about
// 300 bytes to one append-only file) and `renameat2(RENAME_NOREPLACE)` to the final name. No digest (MD5 of 1 KiB is
// about 14,000 instructions), no state lines (the library batches them, 10 ms at a time, with the removals), no thread
// hand-offs: what the durable steps alone cost.
// FLOOR_ASYNC=1 runs each download as a library built on Swift concurrency must at least: a child task of one task
// group a download (CONCURRENCY at a time), the request made and resumed from that task, the task suspended on a
// continuation that the delegate's completion resumes, and two calls to an actor that keeps each running download's
// entry (added before the request, removed after it). The delegate's work (FLOOR_WRITES, FLOOR_DURABLE) is unchanged,
// so the difference to the same run without FLOOR_ASYNC is what tasks, continuations and an actor cost a file — the
// part of the library's cost that its design (async/await and a manager actor) cannot avoid (issue #52).
// FLOOR_PRODUCT=1 (with FLOOR_ASYNC, FLOOR_WRITES and FLOOR_DURABLE) adds the rest of what the library must do for a
// file, done as plainly as a downloader written for small files alone would: the actor keeps a receipt for each
// download (its URL, name, partial file's URL, state and counts) through queued, downloading and completed, and
// forgets it once answered; the body is hashed (the library's MD5) and the digest goes into the record and the
// placement line; the journal gets the download's state line (its options as the library writes them) at the start
// and its removal after the move, both carried by the next placement's `write(2)`. What this costs above FLOOR_ASYNC
// is the required work; what `dl` costs above this is its general machinery.
import Downloader
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
    /// FLOOR_PRODUCT's hashes, by task identifier (delegate queue), and its journal lines waiting for the next write.
    let product: Bool
    var hashes: [Int: Hashing.MD5] = [:]
    let journalLines = NSLock()
    var waitingLines: [UInt8] = []
    /// FLOOR_ASYNC's waiting tasks, by task identifier (made on the cooperative threads, resumed on the delegate queue).
    let waiters = NSLock()
    var waiting: [Int: CheckedContinuation<Int64?, Never>] = [:]
    /// FLOOR_DURABLE's state folder (DIR/.state/, with a slash) and its journal, or `nil`.
    let durable: (state: String, journal: Int32)?

    init(urls: [URL], folder: String?, durable: Bool, product: Bool = false) {
        pending = urls.makeIterator()
        self.product = product
        let folder = folder.map { $0.hasSuffix("/") ? $0 : $0 + "/" }
        self.folder = folder
        if durable, let folder {
            let state = folder + ".state/"
            mkdir(state, 0o755)
            let journal = open(state + "journal", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
            self.durable = (state, journal)
        } else {
            self.durable = nil
        }
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
        if fd < 0, let url = dataTask.originalRequest?.url {
            let name = url.lastPathComponent
            if let durable {
                fd = Durable.create(folder + name, partial: durable.state + name + ".part", origin: url)
            } else {
                fd = open(folder + name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            }
            files[dataTask.taskIdentifier] = fd
        }
        guard fd >= 0 else { return }
        _ = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if product { hashes[dataTask.taskIdentifier, default: Hashing.MD5()].update(data: data) }
    }

    /// FLOOR_PRODUCT: a journal line to go out with the next placement's write.
    func journal(_ line: String) {
        journalLines.lock()
        waitingLines.append(contentsOf: line.utf8)
        journalLines.unlock()
    }

    /// FLOOR_PRODUCT: the lines waiting, taken.
    func takeJournalLines() -> [UInt8] {
        journalLines.lock()
        defer { journalLines.unlock() }
        let lines = waitingLines
        waitingLines.removeAll(keepingCapacity: true)
        return lines
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let md5 = hashes.removeValue(forKey: task.taskIdentifier)?.finalize().hexString
        if let fd = files.removeValue(forKey: task.taskIdentifier), fd >= 0 {
            if let durable, let folder, let url = task.originalRequest?.url {
                let name = url.lastPathComponent
                Durable.place(
                    fd, partial: durable.state + name + ".part", at: folder + name, url: url, journal: durable.journal,
                    md5: md5, before: product ? takeJournalLines() : [])
            }
            close(fd)
        }
        waiters.lock()
        let waiter = waiting.removeValue(forKey: task.taskIdentifier)
        waiters.unlock()
        if let waiter {
            waiter.resume(returning: error == nil ? task.countOfBytesReceived : nil)
            return
        }
        running -= 1
        finished += 1
        if error != nil { failures += 1 }
        startNext()
    }

    /// FLOOR_ASYNC: one download from a task; returns the bytes it received, or `nil` when it failed.
    func fetch(_ url: URL, in session: URLSession) async -> Int64? {
        var request = URLRequest(url: url)
        request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        return await withCheckedContinuation { continuation in
            let task = session.dataTask(with: request)
            waiters.lock()
            waiting[task.taskIdentifier] = continuation
            waiters.unlock()
            task.resume()
        }
    }
}

/// FLOOR_ASYNC's actor: each running download's entry, and the counts.
actor Book {
    /// FLOOR_PRODUCT's receipt of a download.
    struct Receipt {
        enum State: String { case queued, downloading, completed }
        var url: URL
        var filename: String
        var fileURL: URL
        var state: State
        var written: Int64 = 0
    }

    var running: [URL: Int] = [:]
    var receipts: [URL: Receipt] = [:]
    var finished = 0
    var failures = 0
    /// FLOOR_PRODUCT's runner (its journal and partial folder), or `nil`.
    var product: Runner?

    func started(_ url: URL) {
        running[url] = finished
        guard let product, let state = product.durable?.state else { return }
        let name = url.lastPathComponent
        var receipt = Receipt(
            url: url, filename: name, fileURL: URL(fileURLWithPath: state + name + ".part"), state: .queued)
        receipt.state = .downloading
        receipts[url] = receipt
        product.journal(
            #"\#(url.absoluteString)\#t{"put":{"url":"\#(url.absoluteString)","state":"\#(receipt.state.rawValue)","#
                + #""options":{"headers":{"User-Agent":"dl/1.0.0"},"naming":{"suggested":{}},"computesMD5":true,"#
                + #""connections":1}}}\#n"#)
    }

    func ended(_ url: URL, received: Int64?) {
        running[url] = nil
        finished += 1
        if received == nil { failures += 1 }
        guard let product, var receipt = receipts.removeValue(forKey: url) else { return }
        receipt.state = .completed
        receipt.written = received ?? 0
        receipt.fileURL = URL(fileURLWithPath: product.folder! + receipt.filename)
        product.journal(#"\#(url.absoluteString)\#t{"remove":"\#(url.absoluteString)"}\#n"#)
    }

    func serve(_ runner: Runner) { product = runner }

    /// Every URL through `runner`, `concurrency` at a time, each in a child task.
    static func run(_ urls: [URL], concurrency: Int, runner: Runner, session: URLSession) async -> (Int, Int) {
        let book = Book()
        if runner.product { await book.serve(runner) }
        await withTaskGroup(of: Void.self) { group in
            var pending = urls.makeIterator()
            func add(_ url: URL) {
                group.addTask {
                    await book.started(url)
                    let received = await runner.fetch(url, in: session)
                    await book.ended(url, received: received)
                }
            }
            for _ in 0..<concurrency { if let url = pending.next() { add(url) } }
            while await group.next() != nil { if let url = pending.next() { add(url) } }
        }
        return (await book.finished, await book.failures)
    }
}

/// The library's file-system calls for one small file (FLOOR_DURABLE).
enum Durable {
    typealias SetAttribute = @convention(c) (Int32, UnsafePointer<CChar>, UnsafeRawPointer?, Int, Int32) -> Int32
    typealias Rename = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
    static let setAttribute = dlsym(nil, "fsetxattr").map { unsafeBitCast($0, to: SetAttribute.self) }
    static let rename = dlsym(nil, "renameat2").map { unsafeBitCast($0, to: Rename.self) }

    /// The looks for an earlier delivery and for saved state, then the partial file with its origin.
    static func create(_ target: String, partial: String, origin: URL) -> Int32 {
        for _ in 0..<2 {
            let earlier = open(target, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
            if earlier >= 0 { close(earlier) }
        }
        var info = stat()
        _ = stat(partial + ".state", &info)
        let fd = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        if fd >= 0 { set(Array(origin.absoluteString.utf8), named: "user.xdg.origin.url", on: fd) }
        return fd
    }

    /// The length check, the record, the journal's placement line and the move.
    static func place(
        _ fd: Int32, partial: String, at target: String, url: URL, journal: Int32, md5: String? = nil,
        before: [UInt8] = []
    ) {
        var info = stat()
        _ = stat(partial, &info)
        let md5 = md5 ?? String(repeating: "0", count: 32)
        let record = #"{"url":"\#(url.absoluteString)","length":\#(info.st_size),"md5":"\#(md5)"}"#
        set(Array(record.utf8), named: "user.downloader.record", on: fd)
        let line =
            #"\#(url.absoluteString)\#t{"put":{"url":"\#(url.absoluteString)","state":"downloading","placement":"#
            + #"{"name":"\#(target)","length":\#(info.st_size),"checksum":"md5:\#(md5)"}}}\#n"#
        var bytes = before  // one buffer for the waiting lines and this one (empty but in FLOOR_PRODUCT)
        bytes.append(contentsOf: line.utf8)
        _ = bytes.withUnsafeBytes { write(journal, $0.baseAddress, $0.count) }
        _ = rename?(AT_FDCWD, partial, AT_FDCWD, target, 1 /* RENAME_NOREPLACE */)
    }

    private static func set(_ value: [UInt8], named name: String, on fd: Int32) {
        _ = value.withUnsafeBytes { setAttribute?(fd, name, $0.baseAddress, $0.count, 0) }
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
let environment = ProcessInfo.processInfo.environment
let writes = environment["FLOOR_WRITES"]
if let writes { try FileManager.default.createDirectory(atPath: writes, withIntermediateDirectories: true) }
let runner = Runner(
    urls: urls, folder: writes, durable: environment["FLOOR_DURABLE"] == "1",
    product: environment["FLOOR_PRODUCT"] == "1")
let queue = OperationQueue()
queue.maxConcurrentOperationCount = 1
let configuration = URLSessionConfiguration.ephemeral
configuration.httpMaximumConnectionsPerHost = concurrency
if environment["FLOOR_TUNED"] == "1" {
    configuration.httpCookieStorage = nil
    configuration.httpShouldSetCookies = false
    configuration.httpCookieAcceptPolicy = .never
    configuration.urlCache = nil
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
}
let session = URLSession(configuration: configuration, delegate: runner, delegateQueue: queue)
runner.session = session
let start = Date()
if environment["FLOOR_ASYNC"] == "1" {
    Task.detached {
        (runner.finished, runner.failures) = await Book.run(
            urls, concurrency: concurrency, runner: runner, session: session)
        runner.done.signal()
    }
} else {
    queue.addOperation {
        for _ in 0..<concurrency { runner.startNext() }
    }
}
runner.done.wait()
let seconds = Date().timeIntervalSince(start)
print(
    "\(runner.finished) requests, \(runner.failures) failed, \(String(format: "%.2f", seconds)) s, "
        + "\(String(format: "%.0f", Double(runner.finished) / seconds)) per second")
