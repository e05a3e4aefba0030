// urlsession-floor URL discard|md5 [--primed]: what URLSession alone costs on this platform, as a floor for `dl`.
//   discard  — one data task whose delegate only counts bytes (no disk, no hash);
//   md5      — the same, hashing every chunk with Downloader's MD5 on a second serial queue (no disk), the way `dl`
//              hashes beside the network;
//   --primed — first a one-byte request (`Range: bytes=0-0`) on the same session, so that the data task reuses its
//              connection. On Linux a connection's first request spins a core for as long as it lasts (the socket's
//              write source, created while connecting, is never removed); a slow transfer shows it: compare the CPU
//              time with and without `--primed` at 200 KB/s.
// Prints the byte count (and the digest with md5). No disk writes, so the difference to `dl` is the file system.
import Downloader
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

final class Counter: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    let hashing: Bool
    let hashQueue = DispatchQueue(label: "urlsession-floor.hash")
    let done = DispatchSemaphore(value: 0)
    var count = 0
    var md5 = Hashing.MD5()
    var failure: (any Error)?

    init(hashing: Bool) {
        self.hashing = hashing
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        count += data.count
        if hashing { hashQueue.async { self.md5.update(data: data) } }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        failure = error
        hashQueue.sync {}
        done.signal()
    }
}

let arguments = CommandLine.arguments
let primed = arguments.count == 4 && arguments[3] == "--primed"
guard arguments.count == 3 || primed, let url = URL(string: arguments[1]), ["discard", "md5"].contains(arguments[2])
else {
    FileHandle.standardError.write(Data("usage: urlsession-floor URL discard|md5 [--primed]\n".utf8))
    exit(2)
}
let counter = Counter(hashing: arguments[2] == "md5")
let queue = OperationQueue()
queue.maxConcurrentOperationCount = 1
let session = URLSession(configuration: .ephemeral, delegate: counter, delegateQueue: queue)
var request = URLRequest(url: url)
request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
if primed {
    var first = request
    first.setValue("bytes=0-0", forHTTPHeaderField: "Range")
    session.dataTask(with: first).resume()
    counter.done.wait()
    counter.count = 0
    counter.md5 = Hashing.MD5()
}
session.dataTask(with: request).resume()
counter.done.wait()
if let failure = counter.failure {
    FileHandle.standardError.write(Data("urlsession-floor: \(failure)\n".utf8))
    exit(1)
}
print(counter.count, counter.hashing ? counter.md5.finalize().hexString : "")
