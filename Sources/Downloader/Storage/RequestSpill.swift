import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Requests parked on disk and read back in the order they were parked: a batch holds any number of them in constant
/// memory.
///
/// The file lives in the state folder, mode 0600, and is unlinked as soon as it is created, so nothing of it outlives
/// the process and no other process finds it by name — but for a kill between the two calls, which leaves the name; the
/// next manager on the folder deletes it (`isFileName(_:)`). A line is the URL, a tab and the request's options as the
/// journal writes them, or nothing when they are the options of the line before (a list's requests mostly share
/// theirs). Only requests that read back equal and hold no secret are parked: no credentials in a URL or mirror and no
/// `Authorization`, `Cookie` or `Proxy-Authorization` header (secrets never reach the disk), no relative URLs, options
/// that survive the round trip.
final class RequestSpill {
    private let fd: Int32
    /// Bytes appended and not yet written: written in 64 KiB pieces.
    private var pending: [UInt8] = []
    private var written: Int64 = 0
    /// Read back so far: the file offset, and the bytes read from there and not yet used.
    private var readOffset: Int64 = 0
    private var readBuffer: [UInt8] = []
    private var readIndex = 0
    /// The options last parked, and whether they read back equal; the options last read back.
    private var lastParked: (options: DownloadOptions, isRepresentable: Bool)?
    private var lastRead = DownloadOptions()
    /// Requests parked and not yet read back.
    private(set) var count = 0
    /// A write failed (a full disk): nothing more is parked; what was parked is still read back.
    private var hasFailed = false

    /// Creates the file in the state folder and unlinks it.
    /// - Returns: `nil` when the folder takes no file.
    init?(in folder: StateFolder) {
        let name = Self.newFileName()
        guard let fd = try? folder.openFile(name, in: .state, flags: O_RDWR | O_CREAT | O_EXCL) else { return nil }
        _ = folder.remove(name, in: .state)
        self.fd = fd
    }

    deinit { _ = closeDescriptor(fd) }

    /// How a spill file's name begins: the process's id, a dash and a random number follow.
    static let namePrefix = ".spill-"

    /// A name for a new spill file: the prefix, this process's id and a random number.
    static func newFileName() -> String {
        "\(namePrefix)\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
    }

    /// Whether `name` is one this type gives its file: a kill between creating and unlinking it leaves that name, which
    /// the next manager on the folder deletes (`StateFolder.removeTemporaryFiles(in:)`; it holds the folder's lock, so
    /// no spill of a running process is there).
    /// - Parameter name: a name in the state folder.
    /// - Returns: whether it is `.spill-`, digits, a dash and digits.
    static func isFileName(_ name: String) -> Bool {
        guard name.hasPrefix(namePrefix) else { return false }
        let numbers = name.dropFirst(namePrefix.count).split(separator: "-", omittingEmptySubsequences: false)
        return numbers.count == 2 && numbers.allSatisfy { !$0.isEmpty && $0.allSatisfy { ("0"..."9").contains($0) } }
    }

    /// Parks a request.
    /// - Returns: `false` when it cannot be parked (a secret, a relative URL, options that do not read back equal, or
    ///   a failed write): the caller keeps it.
    func park(_ request: DownloadRequest) -> Bool {
        guard !hasFailed, request.url.baseURL == nil, !request.url.hasCredentials,
            !request.options.mirrors.contains(where: \.hasCredentials), !request.options.carriesSecretHeader
        else { return false }
        var line = Array(request.url.absoluteString.utf8)
        guard !line.contains(UInt8(ascii: "\t")), !line.contains(UInt8(ascii: "\n")) else { return false }
        line.append(UInt8(ascii: "\t"))
        if lastParked?.options != request.options {
            let json = Self.json(request.options)
            let decoded = try? JSONDecoder().decode(DownloadOptions.self, from: Data(json))
            lastParked = (request.options, decoded == request.options)
            line.append(contentsOf: json)
        }
        guard lastParked?.isRepresentable == true else {
            lastParked = nil  // the next line must carry its own options
            return false
        }
        pending.append(contentsOf: line)
        pending.append(UInt8(ascii: "\n"))
        count += 1
        if pending.count >= 1 << 16, !flush() { hasFailed = true }
        return true
    }

    /// The request parked first and not yet read back, if any.
    func next() -> DownloadRequest? {
        guard count > 0, let line = nextLine() else { return nil }
        count -= 1
        guard let tab = line.firstIndex(of: UInt8(ascii: "\t")),
            let url = URL(string: String(decoding: line[..<tab], as: UTF8.self))
        else { return nil }  // not reached: every line was written here
        let options = line[(tab + 1)...]
        if !options.isEmpty, let decoded = try? JSONDecoder().decode(DownloadOptions.self, from: Data(options)) {
            lastRead = decoded
        }
        return DownloadRequest(url, options: lastRead)
    }

    private static func json(_ options: DownloadOptions) -> [UInt8] {
        var out = JSONText()
        options.write(to: &out)
        return out.bytes
    }

    /// Writes what is pending. - Returns: `false` when the file system refused (what is pending stays in memory).
    private func flush() -> Bool {
        var done = 0
        let ok = pending.withUnsafeBytes { bytes -> Bool in
            while done < bytes.count {
                let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(written) + off_t(done))
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return false }
                done += n
            }
            return true
        }
        written += Int64(done)
        pending.removeFirst(done)
        return ok
    }

    /// The next line, without its newline: from the file first, then from what is pending.
    private func nextLine() -> [UInt8]? {
        while true {
            if let end = readBuffer[readIndex...].firstIndex(of: UInt8(ascii: "\n")) {
                defer { readIndex = end + 1 }
                return Array(readBuffer[readIndex..<end])
            }
            readBuffer.removeFirst(readIndex)
            readIndex = 0
            if readOffset < written {
                var chunk = [UInt8](repeating: 0, count: Int(min(written - readOffset, 1 << 16)))
                let n = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, $0.count, off_t(readOffset)) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return nil }
                readBuffer.append(contentsOf: chunk[..<n])
                readOffset += Int64(n)
            } else if !pending.isEmpty {
                if !hasFailed && flush() { continue }
                hasFailed = true
                if readOffset < written { continue }  // what the failed flush wrote first
                // Written nowhere: read from memory (nothing more is parked after a failure).
                readBuffer.append(contentsOf: pending)
                pending.removeAll()
            } else {
                return nil
            }
        }
    }
}
