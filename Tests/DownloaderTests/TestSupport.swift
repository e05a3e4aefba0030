import Foundation
import HTTPTestServer

@testable import Downloader

/// Whether the tests run under ThreadSanitizer (CI sets `TSAN_OPTIONS` for that stage): everything is 5–10 times
/// slower, so the longest randomised loops run fewer rounds.
let runsUnderSanitizer = ProcessInfo.processInfo.environment["TSAN_OPTIONS"] != nil

/// A fresh temporary directory, removed by `remove()`.
struct TemporaryDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("downloader-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// Wraps a directory someone else owns (a `TestWorkspace`'s).
    init(existing url: URL) {
        self.url = url
    }

    func remove() {
        try? FileManager.default.removeItem(at: url)
    }

    /// The regular files below the directory, as paths relative to it, sorted.
    func files() -> [String] {
        let root = url.resolvingSymlinksInPath().path
        guard let enumerator = FileManager.default.enumerator(atPath: root) else { return [] }
        return enumerator.compactMap { item -> String? in
            guard let path = item as? String else { return nil }
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: root + "/" + path, isDirectory: &isDirectory)
            return isDirectory.boolValue ? nil : path
        }.sorted()
    }
}

/// Copies a live state folder as a `kill -9` at this instant could leave it, for crash tests.
///
/// Files come before folders and saved states before the files they describe: what is saved first is copied first,
/// and a partial file copied later only holds more. A file written whole and renamed into place may vanish between
/// the listing and its copy (its temporary name, `AtomicFile.temporaryMarker`); that is a crash before the write began
/// and it is left out. `FileManager.copyItem` failed the whole copy then (CI, `df5ee35`).
/// - Parameters:
///   - source: the folder being written to (a `.downloader` or its `partial`).
///   - destination: where the image goes; it must not exist.
/// - Throws: any failure but a vanished temporary file.
func copyAsCrashLeavesIt(_ source: URL, to destination: URL) throws {
    let fm = FileManager.default
    try fm.createDirectory(at: destination, withIntermediateDirectories: true)
    var files: [String] = []
    var folders: [String] = []
    for name in try fm.contentsOfDirectory(atPath: source.path) {
        var isDirectory: ObjCBool = false
        guard fm.fileExists(atPath: source.appendingPathComponent(name).path, isDirectory: &isDirectory) else {
            continue  // gone since the listing: renamed away or removed, as a crash a moment earlier may see it
        }
        if isDirectory.boolValue { folders.append(name) } else { files.append(name) }
    }
    files.sort { $0.hasSuffix(".state") && !$1.hasSuffix(".state") }
    for name in files {
        do {
            try fm.copyItem(at: source.appendingPathComponent(name), to: destination.appendingPathComponent(name))
        } catch {
            // Renamed into place meanwhile: the image is then that of a crash before this save began (a start clears
            // temporary files anyway).
            guard name.contains(AtomicFile.temporaryMarker),
                !fm.fileExists(atPath: source.appendingPathComponent(name).path)
            else {
                throw error
            }
        }
    }
    for name in folders.sorted() {
        try copyAsCrashLeavesIt(source.appendingPathComponent(name), to: destination.appendingPathComponent(name))
    }
}

extension DownloadManager.Configuration {
    /// A configuration for tests: quick retries, and the given limits.
    static func forTests(
        directory: URL, maximumActive: Int = 4, retryLimit: Int = 5, stallTimeout: TimeInterval = TestTime.stallTimeout,
        window: Int = 16 << 20
    ) -> DownloadManager.Configuration {
        var configuration = DownloadManager.Configuration(directory: directory)
        configuration.maximumActiveDownloads = maximumActive
        configuration.retryLimit = retryLimit
        configuration.retryBaseDelay = 0.01
        configuration.stallTimeout = stallTimeout
        configuration.windowSize = window
        // The first request is a whole window cut short when slow in production, else 16 KiB; these tests were
        // written around 64 KiB windows and keep a short first request of that size (TransferTests and dlTests
        // cover the production rule).
        configuration.firstWindowSize = min(window, 64 << 10)
        configuration.firstRequestBudget = nil
        return configuration
    }
}

/// Reads a whole file's MD5.
func md5OfFile(_ url: URL) throws -> MD5Digest {
    MD5.hash(data: try Data(contentsOf: url))
}

func fileSize(_ url: URL) -> Int64? {
    FileManager.default.sizeOfItem(at: url)
}

/// Runs a transfer and returns its outcome as a `Result`, for tests that expect failures.
func runTransfer(_ transfer: Transfer) async -> Result<TransferResult, DownloadError> {
    do {
        return .success(try await transfer.run())
    } catch {
        return .failure(error)
    }
}

/// Runs blocking work on a thread of its own, so that it never holds one of the few cooperative threads.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// The first event that matches, or `nil` when none came before the deadline (a deadline, not synchronisation).
func firstEvent(
    in stream: AsyncStream<DownloadEvent>, within limit: Duration = .seconds(20),
    where matches: @escaping @Sendable (DownloadEvent) -> Bool
) async -> DownloadEvent? {
    await withTaskGroup(of: DownloadEvent?.self) { group in
        group.addTask {
            for await event in stream where matches(event) { return event }
            return nil
        }
        group.addTask {
            try? await Task.sleep(for: TestTime.scaled(limit))
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

/// Deterministic pseudo-random bytes (splitmix64), so failures are reproducible.
func pseudoRandomBytes(count: Int, seed: UInt64) -> [UInt8] {
    var state = seed
    var out = [UInt8]()
    out.reserveCapacity(count)
    while out.count < count {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        z ^= z >> 31
        for i in 0..<8 where out.count < count { out.append(UInt8(truncatingIfNeeded: z >> (8 * UInt64(i)))) }
    }
    return out
}

/// The hex digest a system tool (`md5sum`, `sha256sum`, …) prints for a file.
func systemDigest(_ tool: String, of file: URL) throws -> String? {
    // SpawnedProcess, not Foundation's Process: its run() crashes now and then on Swift 6.3 (see SpawnedProcess).
    let process = try SpawnedProcess(
        executable: URL(fileURLWithPath: tool), arguments: [file.path],
        environment: ProcessInfo.processInfo.environment, directory: file.deletingLastPathComponent())
    _ = process.waitUntilExit()
    return String(decoding: process.output.stdout, as: UTF8.self).split(separator: " ").first.map(String.init)
}

extension TransferResult {
    /// The MD5 of the file, when it was hashed with MD5 (what most engine tests compare).
    var md5: MD5Digest? { checksum?.algorithm == .md5 ? checksum.flatMap { MD5Digest(bytes: $0.digest) } : nil }
}

extension DownloadDirectory {
    /// A download's partial file and saved state, reached as the engine reaches them.
    func partialFiles(for url: URL) -> PartialFiles {
        PartialFiles(folder: state, url: url)
    }

    /// A download's saved state, when there is a usable one.
    func savedState(for url: URL) -> PartialState? {
        if case .valid(let state) = partialFiles(for: url).loadState() { return state }
        return nil
    }
}

/// A tmpfs of a given size mounted for one test (root, in a sandbox that allows mounts): a real full disk, with no
/// link planted anywhere. Unmounted when it goes.
final class SmallDisk: Sendable {
    /// Whether this machine lets the tests mount a tmpfs.
    static let isAvailable: Bool = {
        guard
            let probe = try? SmallDisk(
                at: FileManager.default.temporaryDirectory.appendingPathComponent(
                    "mount-probe-\(UUID().uuidString)"), size: "64k")
        else { return false }
        probe.unmount()
        try? FileManager.default.removeItem(at: probe.url)
        return true
    }()

    let url: URL

    /// Creates the folder (with its parents) and mounts a tmpfs of `size` (`mount -o size=`, e.g. "64k") on it.
    init(at url: URL, size: String) throws {
        self.url = url
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        guard Self.run("/bin/mount", "-t", "tmpfs", "-o", "size=\(size)", "tmpfs", url.path) == 0 else {
            throw POSIXError(.EPERM)
        }
    }

    deinit {
        unmount()
    }

    func unmount() {
        Self.run("/bin/umount", "-l", url.path)
    }

    /// Fills the disk to the last byte with a file called `filler`.
    func fill() throws {
        let filler = url.appendingPathComponent("filler")
        _ = FileManager.default.createFile(atPath: filler.path, contents: nil)
        let handle = try FileHandle(forWritingTo: filler)
        let block = Data(count: 4096)
        while (try? handle.write(contentsOf: block)) != nil {}
        for _ in 0..<4096 where (try? handle.write(contentsOf: Data(count: 1))) != nil {}
        try? handle.close()
    }

    @discardableResult
    static func run(_ tool: String, _ arguments: String...) -> Int32 {
        // SpawnedProcess, not Foundation's Process: its run() crashed CI here once (SIGSEGV in its /proc/self/fd scan).
        let process = try? SpawnedProcess(
            executable: URL(fileURLWithPath: tool), arguments: arguments,
            environment: ProcessInfo.processInfo.environment, directory: URL(fileURLWithPath: "/"))
        return process?.waitUntilExit() ?? -1
    }
}

/// A transfer observer made of closures, for engine tests that watch one kind of news.
struct ClosureObserver: TransferObserver {
    var progress: @Sendable (_ written: Int64, _ total: Int64?) -> Void = { _, _ in }
    var warn: @Sendable (String) -> Void = { _ in }
    var note: @Sendable (String) -> Void = { _ in }
    var willPlace: @Sendable (TransferPlacement) -> Void = { _ in }

    func transferProgressed(written: Int64, total: Int64?) { progress(written, total) }
    func transferRequestsChanged(by delta: Int) {}
    func transferWillPlace(_ placement: TransferPlacement) { willPlace(placement) }
    func transferSays(_ news: TransferNews) {
        switch news {
        case .warning(let reason): warn(reason)
        case .note(let message): note(message)
        }
    }
}

extension Transfer {
    /// A transfer whose observer is made of closures (`ClosureObserver`).
    convenience init(
        url: URL, options: DownloadOptions, directory: DownloadDirectory, bridge: SessionBridge,
        configuration: Configuration = Configuration(), replacing: URL? = nil, limiters: [BandwidthLimiter] = [],
        warn: @escaping @Sendable (String) -> Void = { _ in }, note: @escaping @Sendable (String) -> Void = { _ in },
        progress: @escaping @Sendable (_ written: Int64, _ total: Int64?) -> Void = { _, _ in }
    ) {
        self.init(
            url: url, options: options, directory: directory, bridge: bridge, configuration: configuration,
            replacing: replacing, limiters: limiters,
            observer: ClosureObserver(progress: progress, warn: warn, note: note))
    }
}
