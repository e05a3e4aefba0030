// downloader-bench: release-mode measurements of the library's hot paths.
//
//   swift run --package-path Benchmarks -c release downloader-bench md5 FILE [FILE...]
//
// Prints "<hex digest>  <file>  <seconds> s  <MiB/s>" per file, like md5sum plus timing.
import Downloader
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Hashes a file with `MD5`, reading it in 4 MiB blocks into one reused buffer.
/// - Parameter path: the file to hash.
/// - Returns: the digest and the wall time in seconds.
func md5(ofFileAt path: String) throws -> (MD5Digest, Double) {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    defer { close(fd) }
    let capacity = 4 << 20
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 64)
    defer { buffer.deallocate() }
    let start = DispatchTime.now()
    var hasher = MD5()
    while true {
        let count = read(fd, buffer.baseAddress, capacity)
        if count < 0 {
            if errno == EINTR { continue }
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        if count == 0 { break }
        hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
    }
    let digest = hasher.finalize()
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
    return (digest, seconds)
}

func usage() -> Never {
    FileHandle.standardError.write(Data("usage: downloader-bench md5 FILE...\n".utf8))
    exit(2)
}

let arguments = CommandLine.arguments.dropFirst()
guard let command = arguments.first else { usage() }
switch command {
case "md5":
    let files = arguments.dropFirst()
    guard !files.isEmpty else { usage() }
    for file in files {
        do {
            let (digest, seconds) = try md5(ofFileAt: file)
            let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0
            let rate = Double(size) / 1_048_576 / max(seconds, 1e-9)
            print("\(digest)  \(file)  \(String(format: "%.3f", seconds)) s  \(String(format: "%.0f", rate)) MiB/s")
        } catch {
            FileHandle.standardError.write(Data("downloader-bench: \(file): \(error)\n".utf8))
            exit(1)
        }
    }
default:
    usage()
}
