// A manager in a process of its own, for the model-based test's `kill -9` (DownloadManagerModelTests): it opens the
// directory, asks for every request, prints `asked`, and waits for each download to rest; then it shuts down. It
// prints `warning URL` and `failed URL` for what it would tell its user.
//
//     downloader-model-child DIR MAXIMUM-ACTIVE REQUESTS-JSON
//
// REQUESTS-JSON is an array of {"url": …, "options": DownloadOptions}.
import Downloader
import Foundation

struct Request: Codable {
    var url: URL
    var options: DownloadOptions
}

let arguments = CommandLine.arguments
guard arguments.count == 4, let maximumActive = Int(arguments[2]),
    let requests = try? JSONDecoder().decode([Request].self, from: Data(arguments[3].utf8))
else {
    FileHandle.standardError.write(Data("usage: downloader-model-child DIR MAXIMUM-ACTIVE REQUESTS-JSON\n".utf8))
    exit(2)
}
var configuration = DownloadManager.Configuration(directory: URL(fileURLWithPath: arguments[1]))
configuration.maximumActiveDownloads = maximumActive
configuration.retryBaseDelay = 0.01
configuration.firstWindowSize = 64 << 10
configuration.firstRequestBudget = nil
// What this process says to its user, for the test to read: a warning, or a download that failed. Said from the log
// handler, which the manager calls as it decides, before it saves what follows: a reader of `events()` is another
// task, and a `kill -9` between the journal's line (the download completed, its wrong expectation settled) and that
// task's turn would lose the warning, and the test would blame the manager.
configuration.log = { record in
    guard let url = record.metadata["url"] else { return }
    if record.level == .warning && record.metadata["attempt"] == nil {  // a retry is no warning
        FileHandle.standardOutput.write(Data("warning \(url)\n".utf8))
    } else if record.level == .error && record.metadata["state"] == DownloadState.failed.rawValue {
        FileHandle.standardOutput.write(Data("failed \(url)\n".utf8))
    }
}
let manager = try DownloadManager(configuration: configuration)
for request in requests { await manager.enqueue(request.url, options: request.options) }
FileHandle.standardOutput.write(Data("asked\n".utf8))
for request in requests { _ = try? await manager.download(request.url) }
await manager.shutdown()
exit(0)
