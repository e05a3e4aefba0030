// naive-download URL FILE: the naive URLSession baseline — one data task, and a delegate that writes each chunk
// to the file as it arrives. On Linux nothing slows the socket down to the disk, so chunks pile up in memory.
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

final class Writer: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    let handle: FileHandle
    let done = DispatchSemaphore(value: 0)
    var failure: (any Error)?

    init(handle: FileHandle) {
        self.handle = handle
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        handle.write(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        failure = error
        done.signal()
    }
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let url = URL(string: arguments[1]) else {
    FileHandle.standardError.write(Data("usage: naive-download URL FILE\n".utf8))
    exit(2)
}
guard FileManager.default.createFile(atPath: arguments[2], contents: nil),
    let handle = FileHandle(forWritingAtPath: arguments[2])
else { exit(1) }
let writer = Writer(handle: handle)
let queue = OperationQueue()
queue.maxConcurrentOperationCount = 1
let session = URLSession(configuration: .ephemeral, delegate: writer, delegateQueue: queue)
var request = URLRequest(url: url)
request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
session.dataTask(with: request).resume()
writer.done.wait()
try? handle.close()
if let failure = writer.failure {
    FileHandle.standardError.write(Data("naive-download: \(failure)\n".utf8))
    exit(1)
}
