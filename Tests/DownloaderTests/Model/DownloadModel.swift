import Foundation
import HTTPTestServer

@testable import Downloader

/// What the model-based test knows of the world: the resources the server serves (their true bytes and digests),
/// what each caller asked, and what it may be told. It does not copy the manager's rules; it states what any correct
/// manager must show (issue #32).
struct DownloadModel {
    /// One URL of the test server and the truth about it.
    struct Resource {
        let url: URL
        let content: TestContent
        let digests: [Checksum.Algorithm: Checksum]
        /// Two wrong digests per algorithm, so that wrong expectations also contradict each other.
        let wrong: [Checksum.Algorithm: [Checksum]]

        init(url: URL, content: TestContent) {
            self.url = url
            self.content = content
            let data = content.data
            var digests: [Checksum.Algorithm: Checksum] = [:]
            var wrong: [Checksum.Algorithm: [Checksum]] = [:]
            for algorithm in Checksum.Algorithm.allCases {
                let digest = FileDigest.hash(data, algorithm: algorithm)
                digests[algorithm] = digest
                wrong[algorithm] = [0x11, 0x22].map { byte in
                    Checksum(algorithm: algorithm, digest: digest.digest.map { $0 ^ byte })!
                }
            }
            self.digests = digests
            self.wrong = wrong
        }

        /// Whether `checksum` is a digest of these bytes.
        func isTrue(_ checksum: Checksum) -> Bool {
            digests[checksum.algorithm] == checksum
        }
    }

    /// Someone who asked for a download and is told how it ended: a `download` call or an `enqueue` completion.
    struct Caller {
        let id: Int
        let resource: Int
        let expectation: Checksum?
        /// The manager (epoch) it asked.
        let epoch: Int
        /// Its request names the file (`pick-N.bin`) rather than take the server's name.
        var choosesName = false
        /// What may end it early: the kinds of `DownloadError` that events since its request allow.
        var allowedErrors: Set<String> = []
        var answered = false
    }

    /// An expectation given without a way to answer (`enqueue` without a completion): a wrong one must be said as a
    /// warning, or fail the download, before the download shows `.completed` with other bytes.
    struct Unanswerable {
        let resource: Int
        let expectation: Checksum
        /// The position in the event log from which a warning or failure counts.
        let since: Int
    }

    var resources: [Resource]
    var callers: [Int: Caller] = [:]
    var unanswerable: [Unanswerable] = []
    /// Resources for which some wrong expectation was ever given (a mismatch may then reach any of its callers).
    var wrongGiven: Set<Int> = []
    /// Whether a resource is known to the manager as far as the model can tell (asked and neither removed nor
    /// forgotten since).
    var known: Set<Int> = []
    /// Resources some request asked for under the server's name (in this process, a batch or a killed child). The
    /// manager refuses a request that names the file of a download underway under another name (it does not rename a
    /// download underway), so a caller that chose a name for one of these may be told `conflictingOptions`. Requests
    /// reach the manager in an order the model does not know (a `download` call and a batch's later requests run in
    /// tasks of their own), so this is never cleared: the model only insists that a resource always asked under one
    /// name is never refused for its name.
    var askedUnderServerName: Set<Int> = []
    var nextCallerID = 0

    /// Registers a caller of `resource`.
    /// - Parameter choosesName: the request names the file rather than take the server's name.
    mutating func addCaller(_ resource: Int, expectation: Checksum?, choosesName: Bool, epoch: Int) -> Int {
        nextCallerID += 1
        var caller = Caller(id: nextCallerID, resource: resource, expectation: expectation, epoch: epoch)
        caller.choosesName = choosesName
        callers[nextCallerID] = caller
        if let expectation, !resources[resource].isTrue(expectation) { wrongGiven.insert(resource) }
        noteRequest(for: resource, choosesName: choosesName)
        return nextCallerID
    }

    /// A request for `resource`, with or without a caller to answer.
    mutating func noteRequest(for resource: Int, choosesName: Bool) {
        known.insert(resource)
        if !choosesName { askedUnderServerName.insert(resource) }
    }

    /// Every caller of `resource` still waiting may now be ended with an error of `kind`.
    mutating func allow(_ kind: String, for resource: Int?) {
        for (id, caller) in callers where !caller.answered && (resource == nil || caller.resource == resource) {
            callers[id]?.allowedErrors.insert(kind)
        }
    }

    /// Checks what a caller was told against what it asked.
    /// - Returns: the problems, empty when the answer is one a correct manager may give.
    func problems(answering id: Int, with result: Result<DownloadReceipt, DownloadError>) -> [String] {
        guard let caller = callers[id] else { return ["caller \(id) unknown"] }
        let resource = resources[caller.resource]
        switch result {
        case .success(let receipt):
            var problems: [String] = []
            if receipt.url != resource.url { problems.append("caller \(id) got the receipt of \(receipt.url)") }
            if receipt.state != .completed { problems.append("caller \(id) succeeded with \(receipt.state)") }
            if receipt.totalBytesWritten != Int64(resource.content.size) {
                problems.append("caller \(id) succeeded with \(receipt.totalBytesWritten) bytes")
            }
            if let checksum = receipt.checksum, !resource.isTrue(checksum) {
                problems.append("caller \(id) succeeded with the digest \(checksum) of other bytes")
            }
            if let expectation = caller.expectation, !resource.isTrue(expectation) {
                problems.append("caller \(id) expected \(expectation), which the bytes do not have, and succeeded")
            }
            return problems
        case .failure(let error):
            let kind = Self.kind(of: error)
            // A wrong expectation fails its caller, or, given first, refuses the callers that expect otherwise.
            if ["checksumMismatch", "conflictingOptions"].contains(kind) && wrongGiven.contains(caller.resource) {
                return []
            }
            // A name chosen for a download that may be underway under the server's name.
            if kind == "conflictingOptions" && caller.choosesName && askedUnderServerName.contains(caller.resource) {
                return []
            }
            if caller.allowedErrors.contains(kind) { return [] }
            return [
                "caller \(id) (expecting \(caller.expectation.map(String.init(describing:)) ?? "nothing")) got \(error)"
            ]
        }
    }

    static func kind(of error: DownloadError) -> String {
        let kinds: [(DownloadError, String)] = [
            (.checksumMismatch, "checksumMismatch"), (.conflictingOptions, "conflictingOptions"),
            (.suspended, "suspended"), (.cancelled, "cancelled"), (.shutDown, "shutDown"),
            (.connectionFailed, "connectionFailed"), (.fileSystem, "fileSystem"), (.httpStatus, "httpStatus"),
            (.stalled, "stalled"), (.invalidResponse, "invalidResponse"), (.fileChanged, "fileChanged"),
        ]
        return kinds.first { $0.0 == error }?.1 ?? "other"
    }
}

extension FileDigest {
    /// The checksum of bytes in memory (the model's truth).
    static func hash(_ data: Data, algorithm: Checksum.Algorithm) -> Checksum {
        let bytes = [UInt8](data)
        switch algorithm {
        case .md5: return Checksum(algorithm: .md5, digest: Hashing.MD5.hash(data: bytes).bytes)!
        case .sha1: return Checksum(algorithm: .sha1, digest: Hashing.SHA1.hash(data: bytes).bytes)!
        case .sha256: return Checksum(algorithm: .sha256, digest: Hashing.SHA256.hash(data: bytes).bytes)!
        }
    }
}
