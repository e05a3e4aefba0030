import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

/// Every fault of the reliability issue through the real manager (with retries): each ends as a file whose MD5 is
/// the content's, or as a clear `DownloadError` with nothing in the completed area. Afterwards the completed area is
/// scanned: no file in it may differ from a version the server really served.
@Suite("Fault matrix")
struct FaultMatrixTests {
    enum Outcome: Sendable, CustomStringConvertible {
        /// Completes with one of these versions' bytes.
        case completes(versions: ClosedRange<Int>)
        /// Fails with this kind of error.
        case fails(DownloadError)

        static let completes = Outcome.completes(versions: 0...0)

        var description: String {
            switch self {
            case .completes(let versions): return "completes (versions \(versions))"
            case .fails(let error): return "fails with \(error)"
            }
        }
    }

    struct Case: Sendable {
        let name: String
        let size: Int
        let options: String
        let outcome: Outcome
        /// A path other than /bytes/NAME (redirects); the content is still NAME's.
        var path: String?
    }

    static let window = 65_536
    static let size = 200_000
    /// The manager's stall timeout: the suite's, which a busy machine does not reach by accident. With 1 s, a
    /// download whose bytes the loaded process had not read for a second was judged stalled, and two such retries on
    /// top of `drops3`'s three deliberate drops used up its four (CI of `7caeefa`).
    static let stallTimeout = TestTime.stallTimeout
    /// How long the `stall` case's server pauses: well past the timeout.
    static var serverStall: Int { Int((stallTimeout * 3).rounded(.up)) }

    static var cases: [Case] {
        var cases: [Case] = []
        for n in [0, 1, 16_383, 16_384, 16_385, window - 1, window, window + 1, size - 1] {
            cases.append(Case(name: "drop\(n)", size: size, options: "dropAt=\(n)", outcome: .completes))
        }
        cases += [
            Case(name: "drops3", size: size, options: "dropAt=70000&dropCount=3", outcome: .completes),
            Case(name: "norange", size: size, options: "norange=1&dropAt=50000", outcome: .completes),
            Case(name: "rangelie", size: size, options: "norange=lie&dropAt=50000", outcome: .completes),
            Case(
                name: "changedattempts", size: size, options: "change=1&dropAt=50000",
                outcome: .completes(versions: 0...9)),
            Case(name: "changedwindows", size: size, options: "change=2", outcome: .completes(versions: 0...9)),
            Case(name: "shortbody", size: size, options: "lengthExtra=500", outcome: .completes),
            Case(name: "e500", size: 1000, options: "status=500&statusCount=2", outcome: .completes),
            Case(name: "e503ra", size: 1000, options: "status=503&statusCount=2&retryAfter=0", outcome: .completes),
            Case(name: "e429ra", size: 1000, options: "status=429&statusCount=2&retryAfter=0", outcome: .completes),
            Case(
                name: "e429date", size: 1000, options: "status=429&statusCount=1&retryAfterDate=0", outcome: .completes),
            Case(name: "e503always", size: 1000, options: "status=503", outcome: .fails(.httpStatus)),
            Case(name: "e404", size: 1000, options: "status=404", outcome: .fails(.httpStatus)),
            Case(name: "e410", size: 1000, options: "status=410", outcome: .fails(.httpStatus)),
            Case(
                name: "stall", size: size, options: "stallAfter=30000&stall=\(serverStall)&stallCount=1",
                outcome: .completes),
            Case(name: "badmd5", size: 30_000, options: "md5=bad", outcome: .fails(.checksumMismatch)),
            Case(name: "goodmd5", size: 30_000, options: "md5=1&digest=1", outcome: .completes),
            Case(name: "gzip", size: size, options: "gzip=1", outcome: .completes),
            Case(name: "crshift", size: size, options: "contentRangeShift=7", outcome: .fails(.invalidResponse)),
            Case(name: "weaketag", size: size, options: "etag=weak&dropAt=90000", outcome: .completes),
            Case(
                name: "novalidators", size: size, options: "etag=none&lastModified=none&dropAt=90000",
                outcome: .completes),
            Case(name: "nohead", size: size, options: "nohead=1&dropAt=90000", outcome: .completes),
            Case(name: "empty", size: 0, options: "", outcome: .completes),
            Case(
                name: "redirect10", size: 5000, options: "", outcome: .completes, path: "/redirect/9/bytes/redirect10"),
            Case(
                name: "redirect11", size: 5000, options: "", outcome: .fails(.tooManyRedirects),
                path: "/redirect/10/bytes/redirect11"),
            Case(name: "loop", size: 5000, options: "", outcome: .fails(.tooManyRedirects), path: "/loop/0"),
        ]
        return cases
    }

    @Test("Every fault ends verified or as a clear error, and the completed area never holds a corrupt file")
    func faultMatrix() async throws {
        let workspace = try TestWorkspace()
        defer { withExtendedLifetime(workspace) {} }  // its deinit stops the server: keep it to the end
        let server = workspace.server
        let temporary = TemporaryDirectory(existing: workspace.directory)
        let manager = try DownloadManager(
            configuration: .forTests(
                directory: temporary.url, maximumActive: 8, retryLimit: 4, stallTimeout: Self.stallTimeout,
                window: Self.window))

        // Each download's retries and why, said with a failure: a fault matrix that fails on a busy machine must say
        // what it saw.
        let retryEvents = await manager.events(of: [.retrying])
        let recorder = Task {
            var retries: [URL: [DownloadError]] = [:]
            for await case .retrying(let url, _, _, let reason) in retryEvents {
                retries[url, default: []].append(reason)
            }
            return retries
        }

        let cases = Self.cases
        let results = await withTaskGroup(of: (Case, URL, Result<DownloadReceipt, any Error>).self) { group in
            for fault in cases {
                let url = server.url((fault.path ?? "/bytes/\(fault.name)") + "?size=\(fault.size)&\(fault.options)")
                group.addTask {
                    do {
                        return (fault, url, .success(try await manager.download(url)))
                    } catch {
                        return (fault, url, .failure(error))
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }

        await manager.waitUntilQuiet()
        // The events stream ends once the manager has shut down, after its last event: every retry is recorded then.
        await manager.shutdown()
        let retried = await recorder.value

        var corrupt = 0
        for (fault, url, result) in results {
            let reasons = retried[url] ?? []
            if fault.name == "stall" {
                #expect(reasons.contains { $0 == .stalled }, "stall: retried after a stall (retries: \(reasons))")
            }
            switch (fault.outcome, result) {
            case (.completes(let versions), .success(let receipt)):
                let digest = try md5OfFile(receipt.fileURL).hexString
                let expected = versions.map {
                    TestContent(name: fault.name, size: fault.size, version: $0).md5.hexString
                }
                #expect(expected.contains(digest), "\(fault.name): the file is no version the server served")
                #expect(receipt.md5 == digest, "\(fault.name): the receipt's MD5 is the file's")
                if !expected.contains(digest) { corrupt += 1 }
            case (.fails(let kind), .failure(let error)):
                let downloadError = error as? DownloadError
                #expect(downloadError == kind, "\(fault.name): \(error)")
                #expect(
                    downloadError?.url != nil && downloadError?.reason.isEmpty == false,
                    "\(fault.name): says which URL and why")
            default:
                Issue.record("\(fault.name): expected it \(fault.outcome), got \(result); retries: \(reasons)")
            }
        }

        // The completed area holds exactly the completed downloads, each a version the server served.
        let completedNames = Set(results.compactMap { try? $0.2.get().fileURL.lastPathComponent })
        let files = temporary.files().filter { $0.hasPrefix("completed/") }.map {
            String($0.dropFirst("completed/".count))
        }
        #expect(Set(files) == completedNames)
        #expect(corrupt == 0)
    }
}
