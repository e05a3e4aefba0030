// ahc-download URL FILE: downloads with AsyncHTTPClient's FileDownloadDelegate (the peer in BENCHMARKS.md).
import AsyncHTTPClient
import Foundation

/// Downloads `url` into `path`.
/// - Returns: the exit status.
func download(_ url: String, to path: String) async -> Int32 {
    let client = HTTPClient(eventLoopGroupProvider: .singleton)
    var status: Int32 = 0
    do {
        let request = try HTTPClient.Request(url: url)
        let delegate = try FileDownloadDelegate(path: path)
        let progress = try await client.execute(request: request, delegate: delegate).get()
        if progress.receivedBytes == 0 { status = 1 }
    } catch {
        FileHandle.standardError.write(Data("ahc-download: \(error)\n".utf8))
        status = 1
    }
    do {
        try await client.shutdown()
    } catch {
        status = 1
    }
    return status
}

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    FileHandle.standardError.write(Data("usage: ahc-download URL FILE\n".utf8))
    exit(2)
}
exit(await download(arguments[1], to: arguments[2]))
