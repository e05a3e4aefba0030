import Downloader
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `dl -O - URL`: the one file's bytes on stdout as they reach the disk, for `dl -O - URL | tar x`.
///
/// The library downloads into a scratch folder (nothing is resumed and nothing stays behind) on one connection, so
/// that the file grows from its start; this follows the partial file and copies each new byte to stdout. The digest is
/// checked when the last byte is in: a mismatch — or a resource that changed mid-way, which would start the file over
/// — exits 1 with a message that the bytes already written are not the verified file.
enum StreamOutput {
    /// Runs the download. - Returns: the exit status (0 verified, 1 failed).
    static func run(
        _ arguments: Arguments, options: DownloadOptions,
        configure: (inout DownloadManager.Configuration) -> Void
    ) async -> Int32 {
        let url = arguments.urls[0]
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("dl-stream-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        var configuration = DownloadManager.Configuration(directory: scratch)
        configure(&configuration)
        configuration.removesStateWhenFinished = true
        let manager: DownloadManager
        do {
            manager = try DownloadManager(configuration: configuration)
        } catch {
            Console.error(Screen.safe("dl: \(scratch.path): \(error.localizedDescription)") + "\n")
            return 1
        }
        var options = options
        options.connections = 1  // the file must grow from its start
        options.destination = nil
        let follower = Follower()
        let events = await manager.events(for: url)
        let download = Task { try await manager.download(url, options: options) }
        var failure: String?
        for await event in events {
            if let receipt = event.receipt, receipt.state == .downloading || receipt.state == .completed {
                if let problem = follower.copy(from: receipt.fileURL) {
                    failure = problem
                    break
                }
            }
        }
        if let failure {
            await manager.remove(url)
            download.cancel()
            await manager.shutdown()
            return fail(url, failure, written: follower.written)
        }
        do {
            let receipt = try await download.value
            // The verified file is the partial file moved into place: the open descriptor reads it to its end.
            if let problem = follower.copy(from: receipt.fileURL) ?? follower.finish(length: receipt.totalBytesWritten)
            {
                await manager.shutdown()
                return fail(url, problem, written: follower.written)
            }
            await manager.shutdown()
            if !arguments.quiet {
                let verification = receipt.verification.map { "\($0)" } ?? "unverified"
                let line = "dl: \(url.redactedAbsoluteString): \(follower.written) bytes to stdout, \(verification)"
                Console.error(Screen.safe(line) + "\n")
            }
            return 0
        } catch {
            await manager.shutdown()
            let reason = (error as? DownloadError)?.dlReason ?? error.localizedDescription
            return fail(url, reason, written: follower.written)
        }
    }

    private static func fail(_ url: URL, _ reason: String, written: Int64) -> Int32 {
        var message = "dl: \(url.redactedAbsoluteString): \(reason)"
        if written > 0 {
            message += "; \(written) bytes were already written to stdout and are not a verified file: discard them"
        }
        Console.error(Screen.safe(message) + "\n")
        return 1
    }

    /// Copies a growing file to stdout from where it left off.
    final class Follower {
        private var descriptor: Int32 = -1
        /// Bytes written to stdout so far.
        private(set) var written: Int64 = 0
        /// Whether the download started its file over after bytes had been copied.
        private(set) var startedOver = false
        private var buffer = [UInt8](repeating: 0, count: 1 << 20)

        deinit {
            if descriptor >= 0 { close(descriptor) }
        }

        /// Copies what the file has beyond what was copied.
        /// - Returns: why the stream cannot go on (the file started over, stdout closed), or `nil`.
        func copy(from file: URL) -> String? {
            // The library starts a partial file over as a new file under the same name: follow the name while
            // nothing was copied; after that a new file means the download started over.
            var named = stat()
            var opened = stat()
            if startedOver { return nil }
            if descriptor >= 0, lstat(file.path, &named) == 0, fstat(descriptor, &opened) == 0,
                named.st_ino != opened.st_ino || named.st_dev != opened.st_dev
            {
                // After bytes were copied the stream cannot follow: the download's end says why it started over (a
                // digest that did not match fails it), or `finish` does.
                guard written == 0 else {
                    startedOver = true
                    return nil
                }
                close(descriptor)
                descriptor = -1
            }
            if descriptor < 0 {
                descriptor = open(file.path, O_RDONLY | O_NOFOLLOW)
                if descriptor < 0 { return nil }  // not there yet: the first bytes have not arrived
            }
            if fstat(descriptor, &opened) == 0 && Int64(opened.st_size) < written {
                return "the resource changed while it was streamed (the download started over)"
            }
            while true {
                let count = pread(descriptor, &buffer, buffer.count, off_t(written))
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return nil }
                let delivered = buffer.withUnsafeBytes {
                    Console.output(bytes: UnsafeRawBufferPointer(rebasing: $0[0..<count]))
                }
                guard delivered else { return "stdout was closed" }
                written += Int64(count)
            }
        }

        /// Checks that everything verified was copied.
        func finish(length: Int64) -> String? {
            if startedOver {
                return "the download started over (the resource changed, or its bytes did not match their digest)"
            }
            return written == length ? nil : "stdout got \(written) of the file's \(length) bytes"
        }
    }
}
