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
/// downloads already taken finish, then `dl` names the line and exits 2. A named file is read from where the last
/// run with it stopped (`keepPosition(in:)`, `ListPosition`), then from its first line up to there.
final class InputFeed: @unchecked Sendable {
    // Used by one thread at a time: the command line's parse, then the feed's thread (`requests(_:)`).
    private let fd: Int32
    private let path: String
    private var buffer: [UInt8] = []
    private var start = 0
    /// Where `buffer[0]` lies in the file.
    private var bufferOffset: Int64 = 0
    /// Where this part of the reading ends: the file's end, or the saved position when the part before it is read.
    private var end: Int64?
    private var atEnd = false
    private var parser = InputFile.Parser()
    private var peeked: [InputFile.Entry] = []
    /// The state folder the position is kept in, and the list's identity (a regular file named by `-i`).
    private var positionFolder: URL?
    private var identity: [Int64]?
    /// The saved position this run started reading at, until the end of the file: then the part before it is read.
    private var wrapAt: ListPosition?
    /// Why the list stopped being read, when a line was bad.
    let failure = Locked<UsageError?>(nil)

    /// Whether the list is stdin (`-i -`).
    var readsStandardInput: Bool { path == "-" }

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
        if peeked.count == 1, !parser.hasPending, wrapAt != nil, let next = try readEntry() {
            peeked.append(next)  // the part after the saved position held one entry: is there one before it?
        }
        return (peeked.first, peeked.count > 1 || parser.hasPending)
    }

    /// Starts reading where the last run with this list saved its position (`ListPosition`), and keeps the position
    /// up to date as the list is read. Call before anything is read; a pipe, a list that changed or no saved
    /// position reads from the first line.
    /// - Parameter folder: the state folder of the run's directory.
    func keepPosition(in folder: URL) {
        guard fd != STDIN_FILENO, buffer.isEmpty, bufferOffset == 0, peeked.isEmpty else { return }
        identity = ListPosition.identity(of: fd)
        guard identity != nil else { return }
        positionFolder = folder
        guard let saved = ListPosition.saved(in: folder, for: fd), lseek(fd, off_t(saved.offset), SEEK_SET) >= 0 else {
            return
        }
        bufferOffset = saved.offset
        parser = InputFile.Parser(linesBefore: saved.line)
        wrapAt = saved
    }

    /// Removes the saved position: the run ended without a signal, so the next one starts at the first line.
    func forgetPosition() {
        if let positionFolder { ListPosition.forget(in: positionFolder) }
    }

    /// Saves the position of an entry not read yet: a rerun starts reading there.
    private func savePosition(before entry: InputFile.Entry) {
        guard let positionFolder, let identity else { return }
        ListPosition(identity: identity, offset: entry.offset, line: entry.line - 1).save(in: positionFolder)
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
                var unsaved = 0
                var saved: DispatchTime?
                while let entry = try nextEntry() {
                    guard let made = try request(entry) else { continue }
                    unsaved += 1
                    if space.wait(timeout: .now()) == .timedOut {
                        // The look-ahead is full: the moment to note how far the list is read (at most once a second).
                        if saved.map({ DispatchTime.now() > $0 + 1 }) ?? true {
                            savePosition(before: entry)
                            (saved, unsaved) = (.now(), 0)
                        }
                        space.wait()
                    } else if unsaved >= 4096 {
                        savePosition(before: entry)
                        (saved, unsaved) = (.now(), 0)
                    }
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
        while true {
            while let (line, offset) = try nextLine() {
                if let entry = try parser.take(line, at: offset) { return entry }
            }
            if let last = parser.finish() { return last }
            guard let wrap = wrapAt else { return nil }
            // The end of a list read from a saved position: now the part before it.
            wrapAt = nil
            guard lseek(fd, 0, SEEK_SET) == 0 else { throw readError() }
            (buffer, start, bufferOffset, end, atEnd) = ([], 0, 0, wrap.offset, false)
            parser = InputFile.Parser()
        }
    }

    /// The next line without its newline and where it starts, `nil` at the end.
    private func nextLine() throws(UsageError) -> (Substring, Int64)? {
        while true {
            let offset = bufferOffset + Int64(start)
            if let newline = buffer[start...].firstIndex(of: UInt8(ascii: "\n")) {
                defer { start = newline + 1 }
                return (Substring(String(decoding: buffer[start..<newline], as: UTF8.self)), offset)
            }
            if atEnd {
                guard start < buffer.count else { return nil }
                defer { start = buffer.count }
                return (Substring(String(decoding: buffer[start...], as: UTF8.self)), offset)
            }
            bufferOffset += Int64(start)
            buffer.removeFirst(start)
            start = 0
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            let wanted = end.map { min(chunk.count, Int($0 - bufferOffset) - buffer.count) } ?? chunk.count
            let count = wanted <= 0 ? 0 : chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, wanted) }
            if count < 0 && errno == EINTR { continue }
            if count < 0 { throw readError() }
            if count == 0 {
                atEnd = true
            } else {
                buffer.append(contentsOf: chunk[..<count])
            }
        }
    }

    private func readError() -> UsageError {
        UsageError(message: "input file \(path): \(String(cString: strerror(errno)))")
    }
}
