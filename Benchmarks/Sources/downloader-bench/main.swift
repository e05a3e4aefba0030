// downloader-bench: release-mode measurements of the library's hot paths.
//
//   swift run --package-path Benchmarks -c release downloader-bench md5|sha256|sha1 FILE [FILE...]
//   swift run --package-path Benchmarks -c release downloader-bench queue [COUNT]
//   swift run --package-path Benchmarks -c release downloader-bench state [COUNT]
//   swift run --package-path Benchmarks -c release downloader-bench service DIR N URLPREFIX SIZE [BUDGET_MIB]
//
// `md5`, `sha256`, `sha1` print "<hex digest>  <file>  <seconds> s  <MiB/s>" per file, like md5sum plus timing.
// `queue` times the manager's waiting queue: COUNT (default 20000) URLs wait behind one slot that a silent local
// server holds, then `suspendAll()` and `resumeAll()`; it prints "enqueue S s  suspendAll S s  resumeAll S s".
// `state` measures the saved state with COUNT (default 10000) receipts: the time to open the directory (median of 5)
// and the bytes written to the journal per change (100 single removals); it prints
// "open S s  per-change B bytes  journal B bytes".
// `service` runs N downloads at once in one manager, as a service does (URLPREFIX + i + "?size=" + SIZE, e.g. the test
// server's /bytes/), with `Configuration.memoryBudget` BUDGET_MIB when given; it prints the wall time and the peak
// resident memory (VmHWM).
import Downloader
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The hashers `downloader-bench` measures.
protocol BenchedHash {
    associatedtype Digest: Hashing.Digest
    init()
    mutating func update(bufferPointer: UnsafeRawBufferPointer)
    func finalize() -> Digest
}

extension Hashing.MD5: BenchedHash {}
extension Hashing.SHA256: BenchedHash {}
extension Hashing.SHA1: BenchedHash {}

/// Hashes a file, reading it in 4 MiB blocks into one reused buffer.
/// - Parameters:
///   - hasher: the algorithm.
///   - path: the file to hash.
/// - Returns: the hex digest and the wall time in seconds.
func digest<H: BenchedHash>(_ hasher: H.Type, ofFileAt path: String) throws -> (String, Double) {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    defer { close(fd) }
    let capacity = 4 << 20
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 64)
    defer { buffer.deallocate() }
    let start = DispatchTime.now()
    var hasher = H()
    while true {
        let count = read(fd, buffer.baseAddress, capacity)
        if count < 0 {
            if errno == EINTR { continue }
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        if count == 0 { break }
        hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
    }
    let digest = hasher.finalize().hexString
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
    return (digest, seconds)
}

func usage() -> Never {
    FileHandle.standardError.write(
        Data(
            ("usage: downloader-bench md5|sha256|sha1 FILE... | queue [COUNT] | state [COUNT] | "
                + "service DIR N URLPREFIX SIZE [BUDGET_MIB]\n").utf8))
    exit(2)
}

/// A TCP listener on 127.0.0.1 that never accepts: connections complete in the kernel's backlog and requests wait
/// for an answer that never comes, so the one active download holds its slot.
func silentListener() -> (descriptor: Int32, port: Int) {
    let fd = tcpSocket()
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    _ = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    listen(fd, 16)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// Measures opening a directory with `count` receipts and the journal bytes one change costs.
func stateBenchmark(count: Int) async throws {
    let (listener, port) = silentListener()
    defer { close(listener) }
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("state-bench-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    var configuration = DownloadManager.Configuration(directory: directory)
    configuration.maximumActiveDownloads = 1
    configuration.stallTimeout = 600
    let urls = (0..<count).map { URL(string: "http://127.0.0.1:\(port)/s/\($0)")! }
    let first = try DownloadManager(configuration: configuration)
    for url in urls { await first.enqueue(url) }
    await first.suspendAll()
    await first.shutdown()

    var opens: [Double] = []
    for _ in 0..<5 {
        let start = DispatchTime.now().uptimeNanoseconds
        let manager = try DownloadManager(configuration: configuration)
        opens.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
        guard await manager.allReceipts.count == count else { fatalError("receipts lost") }
        await manager.shutdown()
    }
    let journal = directory.appendingPathComponent(".downloader/journal")
    func size() -> Int { (try? FileManager.default.attributesOfItem(atPath: journal.path)[.size] as? Int) ?? 0 }
    let manager = try DownloadManager(configuration: configuration)
    let before = size()
    for url in urls.prefix(100) { await manager.remove(url) }  // 100 changes, each saved on its own
    await manager.shutdown()
    let perChange = Double(size() - before) / 100
    print(
        String(
            format: "open %.3f s  per-change %.0f bytes  journal %d bytes  (%d receipts)", opens.sorted()[2], perChange,
            before, count))
}

/// Times enqueue of `count` waiting downloads, then `suspendAll()` and `resumeAll()`.
func queueBenchmark(count: Int) async throws {
    let (listener, port) = silentListener()
    defer { close(listener) }
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("queue-bench-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    var configuration = DownloadManager.Configuration(directory: directory)
    configuration.maximumActiveDownloads = 1
    configuration.stallTimeout = 600
    let manager = try DownloadManager(configuration: configuration)
    let urls = (0...count).map { URL(string: "http://127.0.0.1:\(port)/q/\($0)")! }
    func seconds(_ work: () async -> Void) async -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        await work()
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }
    let enqueue = await seconds { for url in urls { await manager.enqueue(url) } }
    let suspend = await seconds { await manager.suspendAll() }
    let resume = await seconds { await manager.resumeAll() }
    print(
        String(
            format: "enqueue %.3f s  suspendAll %.3f s  resumeAll %.3f s  (%d waiting)", enqueue, suspend, resume, count
        ))
    await manager.shutdown()
}

/// `service`: N downloads at once in one manager; prints the wall time and the peak resident memory.
func serviceBenchmark(_ arguments: [String]) async throws {
    guard arguments.count >= 4, let count = Int(arguments[1]), let size = Int(arguments[3]) else { usage() }
    var configuration = DownloadManager.Configuration(directory: URL(fileURLWithPath: arguments[0]))
    configuration.maximumActiveDownloads = count
    if arguments.count > 4, let budget = Int(arguments[4]) { configuration.memoryBudget = budget << 20 }
    let manager = try DownloadManager(configuration: configuration)
    let started = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for index in 0..<count {
            let url = URL(string: "\(arguments[2])\(index)?size=\(size)")!
            group.addTask { _ = try await manager.download(url) }
        }
        try await group.waitForAll()
    }
    #if os(Linux)
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let peak = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }.map(String.init) ?? "VmHWM: ?"
    #else
        var usage = rusage()
        getrusage(RUSAGE_SELF, &usage)
        let peak = "peak RSS: \(usage.ru_maxrss / 1024) kB"  // bytes on Darwin
    #endif
    print("\(count) downloads in \(ContinuousClock.now - started); \(peak.replacingOccurrences(of: "\t", with: " "))")
    await manager.shutdown()
}

let arguments = CommandLine.arguments.dropFirst()
guard let command = arguments.first else { usage() }
switch command {
case "md5", "sha256", "sha1":
    let files = arguments.dropFirst()
    guard !files.isEmpty else { usage() }
    for file in files {
        do {
            let (digest, seconds) =
                switch command {
                case "sha256": try digest(Hashing.SHA256.self, ofFileAt: file)
                case "sha1": try digest(Hashing.SHA1.self, ofFileAt: file)
                default: try digest(Hashing.MD5.self, ofFileAt: file)
                }
            let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0
            let rate = Double(size) / 1_048_576 / max(seconds, 1e-9)
            print("\(digest)  \(file)  \(String(format: "%.3f", seconds)) s  \(String(format: "%.0f", rate)) MiB/s")
        } catch {
            FileHandle.standardError.write(Data("downloader-bench: \(file): \(error)\n".utf8))
            exit(1)
        }
    }
case "state":
    let count = arguments.dropFirst().first.flatMap { Int($0) } ?? 10_000
    try await stateBenchmark(count: count)
case "queue":
    let count = arguments.dropFirst().first.flatMap { Int($0) } ?? 20_000
    try await queueBenchmark(count: count)
case "service":
    try await serviceBenchmark(Array(arguments.dropFirst()))
default:
    usage()
}

/// A TCP socket: `SOCK_STREAM` is an `Int32` on Darwin and an enum of Glibc's.
func tcpSocket() -> Int32 {
    #if canImport(Darwin)
        return socket(AF_INET, SOCK_STREAM, 0)
    #else
        return socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #endif
}
