import Dispatch
import Downloader
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `-i FILE` / `-i -`: the input file read as the downloads need it, on a thread of its own (a pipe may block for as
/// long as its writer likes), at most `readAhead` requests ahead of the batch, so a list of any length costs the
/// memory of a few entries.
///
/// The command line reads the first entries at once (`peek`) for the rules that need to know whether there is one
/// URL (`-o`, `--checksum`); the rest is read when the batch asks. A line that cannot be read ends the intake: the
/// downloads already taken finish, then `dl` names the line and exits 2.
final class InputFeed: @unchecked Sendable {
    // Used by one thread at a time: the command line's parse, then the feed's thread (`requests(_:)`).
    private let fd: Int32
    private let path: String
    private var buffer: [UInt8] = []
    private var start = 0
    private var atEnd = false
    private var parser = InputFile.Parser()
    private var peeked: [InputFile.Entry] = []
    /// Why the list stopped being read, when a line was bad.
    let failure = Locked<UsageError?>(nil)

    /// Opens the list (`-` is stdin).
    /// - Throws: `UsageError` when the file cannot be read.
    init(path: String, for flag: String) throws(UsageError) {
        self.path = path
        if path == "-" {
            fd = STDIN_FILENO
        } else {
            fd = open(path, O_RDONLY | O_CLOEXEC)
            var info = stat()
            guard fd >= 0, fstat(fd, &info) == 0, (info.st_mode & S_IFMT) != S_IFDIR else {
                throw UsageError(message: "\(flag): cannot read \(path)")
            }
        }
    }

    /// The first entry, read now and given again by `requests(_:)`, and whether another URL follows it (its line is
    /// read, its options may not be yet): what the command line's single-URL rules need, without waiting for more
    /// of a pipe than the second URL's line.
    /// - Throws: `UsageError` naming a bad line among those read.
    func first() throws(UsageError) -> (entry: InputFile.Entry?, more: Bool) {
        if peeked.isEmpty, let entry = try readEntry() { peeked.append(entry) }
        return (peeked.first, peeked.count > 1 || parser.hasPending)
    }

    /// The list's requests as an asynchronous sequence, read on a thread of its own at most `readAhead` (+ 15) ahead.
    /// - Parameters:
    ///   - readAhead: how many requests may wait, read and not yet taken.
    ///   - request: the request of an entry; a `UsageError` ends the list like a bad line.
    func requests(
        readAhead: Int = 64, _ request: @escaping @Sendable (InputFile.Entry) throws(UsageError) -> DownloadRequest?
    ) -> Requests {
        let (stream, continuation) = AsyncStream<DownloadRequest>.makeStream()
        let space = DispatchSemaphore(value: readAhead)
        let stop = Locked(false)
        continuation.onTermination = { _ in
            stop.withLock { $0 = true }
            space.signal()
        }
        let thread = Thread { [self] in
            defer { continuation.finish() }
            do throws(UsageError) {
                while let entry = try nextEntry() {
                    guard let made = try request(entry) else { continue }
                    space.wait()
                    if stop.withLock({ $0 }) { return }
                    continuation.yield(made)
                }
            } catch {
                failure.withLock { $0 = error }
            }
        }
        thread.start()
        return Requests(stream: stream, space: space)
    }

    /// The requests of an input file; taking one lets the feed read another.
    struct Requests: AsyncSequence, Sendable {
        let stream: AsyncStream<DownloadRequest>
        let space: DispatchSemaphore

        struct AsyncIterator: AsyncIteratorProtocol {
            var base: AsyncStream<DownloadRequest>.Iterator
            let space: DispatchSemaphore
            /// Requests taken whose room is not given back yet: it is given back 16 at a time, so that the feed's
            /// thread, once the look-ahead is full, wakes once per 16 requests instead of once per request (a wake
            /// per request cost more than reading it).
            var untold = 0

            mutating func next() async -> DownloadRequest? {
                let request = await base.next()
                if request != nil { untold += 1 }
                if untold == 16 || (request == nil && untold > 0) {
                    for _ in 0..<untold { space.signal() }
                    untold = 0
                }
                return request
            }
        }

        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: stream.makeAsyncIterator(), space: space) }
    }

    /// The next entry: a peeked one first, then from the file.
    private func nextEntry() throws(UsageError) -> InputFile.Entry? {
        if !peeked.isEmpty { return peeked.removeFirst() }
        return try readEntry()
    }

    /// The next entry of the file.
    private func readEntry() throws(UsageError) -> InputFile.Entry? {
        while let line = try nextLine() {
            if let entry = try parser.take(line) { return entry }
        }
        return parser.finish()
    }

    /// The next line without its newline, `nil` at the end.
    private func nextLine() throws(UsageError) -> Substring? {
        while true {
            if let newline = buffer[start...].firstIndex(of: UInt8(ascii: "\n")) {
                defer { start = newline + 1 }
                return Substring(String(decoding: buffer[start..<newline], as: UTF8.self))
            }
            if atEnd {
                guard start < buffer.count else { return nil }
                defer { start = buffer.count }
                return Substring(String(decoding: buffer[start...], as: UTF8.self))
            }
            buffer.removeFirst(start)
            start = 0
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count < 0 {
                throw UsageError(message: "input file \(path): \(String(cString: strerror(errno)))")
            }
            if count == 0 {
                atEnd = true
            } else {
                buffer.append(contentsOf: chunk[..<count])
            }
        }
    }
}
