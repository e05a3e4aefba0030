import Foundation
import HTTPTestServer
import Testing

@testable import Downloader

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One seeded run of the model-based test: random calls of the public API on real sockets, restarts on the same
/// directory and a child process killed with SIGKILL, checked against `DownloadModel` at every settled point.
final class ModelRun {
    let seed: UInt64
    var random: SeededGenerator
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    /// The manager's directory (inside the workspace, beside a file that must never change).
    let directory: URL
    let sentinel: URL
    let maximumActive: Int
    var model: DownloadModel
    var manager: DownloadManager!
    var epoch = 0
    /// Every event of every manager, in order, with the epoch it came from.
    let log = Locked<[(epoch: Int, event: DownloadEvent)]>([])
    /// How each caller was answered.
    let outcomes = Locked<[Int: Result<DownloadReceipt, DownloadError>]>([:])
    var consumers: [Task<Void, Never>] = []
    var waiters: [Task<Void, Never>] = []
    /// Files the caller forgot: the user's now, never deleted or changed by the manager.
    var forgotten: [URL: Int] = [:]
    /// Resources a `forget` step named: a request that chose a name may still be moving the completed file to it (the
    /// forget waits behind that move), so the file it is forgotten under may be that name (`checkFiles`).
    var forgottenResources: Set<Int> = []
    var problems: [String] = []
    /// The steps asked of `run(steps:)`, for the replay line.
    var steps = 0
    var trace: [String] = [] {
        // Said as it happens with DOWNLOADER_MODEL_VERBOSE: a run that hangs shows where.
        didSet {
            guard Self.saysSteps, let last = trace.last else { return }
            FileHandle.standardError.write(Data("step \(last)\n".utf8))
        }
    }
    static let saysSteps = ProcessInfo.processInfo.environment["DOWNLOADER_MODEL_VERBOSE"] != nil
    /// Resources whose last word from a caller was `suspend` (or `suspendAll`): a caller's pause, which a restart
    /// must never mark interrupted nor continue on its own (issue #35's restart policy).
    var pausedByCaller: Set<Int> = []
    /// Whether the current manager continues interrupted downloads when it opens.
    var continuing = false
    /// The last `download` caller of each resource: its call runs in a task of its own, so until it is answered a
    /// later `suspend` may reach the manager before it (and the request then continues the download).
    var downloadCallers: [Int: Int] = [:]
    /// Callers that are requests of a batch (`ModelRun+Batch.swift`).
    var batchCallers: Set<Int> = []
    /// Outcomes a batch delivered that match none of its requests (each is a problem).
    let strayOutcomes = Locked<[String]>([])

    init(seed: UInt64) throws {
        self.seed = seed
        random = SeededGenerator(seed: seed &* 7919 &+ 17)
        workspace = try TestWorkspace(prefix: "downloader-model")
        directory = workspace.directory.appendingPathComponent("downloads")
        sentinel = workspace.directory.appendingPathComponent("sentinel.txt")
        try Data("the user's file beside the directory\n".utf8).write(to: sentinel)
        maximumActive = Int.random(in: 1...3, using: &random)
        let p = "m\(seed)-"
        let server = workspace.server
        func resource(_ name: String, size: Int, _ query: String) -> DownloadModel.Resource {
            DownloadModel.Resource(
                url: server.url("/bytes/\(p)\(name)?size=\(size)\(query)"),
                content: TestContent(name: p + name, size: size))
        }
        model = DownloadModel(resources: [
            resource("a", size: 120_000, "&rate=1500000"),
            // Two URLs with the same name and the same bytes.
            resource("b", size: 400_000, "&rate=4000000&filename=same.bin"),
            resource("b", size: 400_000, "&rate=4000000&filename=same.bin&twin=1"),
            resource("c", size: 30_000, ""),
            resource("d", size: 300_000, "&rate=3000000&dropAt=150000&dropCount=2"),
            resource("e", size: 200_000, "&rate=2000000&etag=none&lastModified=none"),
        ])
    }

    var configuration: DownloadManager.Configuration {
        var configuration = DownloadManager.Configuration.forTests(directory: directory, maximumActive: maximumActive)
        configuration.directoryLockTimeout = 30
        configuration.continuesInterruptedDownloads = continuing
        return configuration
    }

    /// Where a failure says how to replay it.
    var context: String {
        "seed \(seed) (replay: DOWNLOADER_MODEL_SEED=\(seed) DOWNLOADER_MODEL_STEPS=\(steps) swift test --filter "
            + "DownloadManagerModelTests); "
            + "last steps: \(trace.suffix(12).joined(separator: "; "))"
    }

    func note(_ problem: String) {
        problems.append(problem)
    }

    // MARK: - Managers

    func open() async throws {
        epoch += 1
        manager = try DownloadManager(configuration: configuration)
        let stream = await manager.events()
        let log = self.log
        let epoch = self.epoch
        consumers.append(
            Task {
                for await event in stream { log.withLock { $0.append((epoch, event)) } }
            })
    }

    /// Shuts the manager down; every caller of it is then answered.
    func shutDown() async {
        model.allow("cancelled", for: nil)
        model.allow("shutDown", for: nil)  // a request still on its way to the actor arrives after the shutdown
        await manager.shutdown()
        for consumer in consumers { await consumer.value }
        consumers = []
        await waitForAnswers(of: epoch)
    }

    // MARK: - Steps

    func run(steps: Int) async throws {
        self.steps = steps
        try await open()
        for step in 0..<steps {
            try await self.step(step)
            if problems.count > 0 { break }
        }
        if problems.isEmpty {
            trace.append("final: resumeAll")
            pausedByCaller.removeAll()
            await manager.resumeAll()
            await settle(final: true)
        }
        if problems.isEmpty {
            trace.append("final: restart")
            try await restart()
            await settle()
        }
        await manager.shutdown()
        for consumer in consumers { await consumer.value }
        checkSentinel()
    }

    func options(for resource: Int) -> (DownloadOptions, Checksum?) {
        var options = DownloadOptions()
        let truth = model.resources[resource]
        let algorithm = Checksum.Algorithm.allCases.randomElement(using: &random)!
        switch Int.random(in: 0..<20, using: &random) {
        case 0..<9: break
        case 9..<14: options.checksum = truth.digests[algorithm]
        default: options.checksum = truth.wrong[algorithm]!.randomElement(using: &random)
        }
        // One name per resource: the only contradiction two requests can have is this name against the server's.
        if Int.random(in: 0..<10, using: &random) == 0 { options.naming = .custom("pick-\(resource % 2).bin") }
        if Int.random(in: 0..<5, using: &random) == 0 { options.priority = Int.random(in: 1...3, using: &random) }
        return (options, options.checksum)
    }

    func step(_ step: Int) async throws {
        let resource = Int.random(in: 0..<model.resources.count, using: &random)
        let url = model.resources[resource].url
        let roll = Int.random(in: 0..<100, using: &random)
        switch roll {
        case 0..<22:
            let (options, expectation) = options(for: resource)
            let id = model.addCaller(
                resource, expectation: expectation, choosesName: options.chosenNaming != nil, epoch: epoch)
            pausedByCaller.remove(resource)
            downloadCallers[resource] = id
            trace.append("\(step): download r\(resource) #\(id) \(describe(options))")
            let manager = self.manager!
            let outcomes = self.outcomes
            waiters.append(
                Task {
                    let result: Result<DownloadReceipt, DownloadError>
                    do {
                        result = .success(try await manager.download(url, options: options))
                    } catch let error as DownloadError {
                        result = .failure(error)
                    } catch {
                        result = .failure(.cancelled(url, reason: "\(error)"))
                    }
                    outcomes.withLock { $0[id] = result }
                })
        case 22..<32:
            let (options, expectation) = options(for: resource)
            let id = model.addCaller(
                resource, expectation: expectation, choosesName: options.chosenNaming != nil, epoch: epoch)
            pausedByCaller.remove(resource)
            trace.append("\(step): enqueue r\(resource) with completion #\(id) \(describe(options))")
            let outcomes = self.outcomes
            await manager.enqueue(
                url, options: options, completion: { result in outcomes.withLock { $0[id] = result } })
        case 32..<42:
            let (options, expectation) = options(for: resource)
            trace.append("\(step): enqueue r\(resource) \(describe(options))")
            model.noteRequest(for: resource, choosesName: options.chosenNaming != nil)
            pausedByCaller.remove(resource)
            if let expectation, !model.resources[resource].isTrue(expectation) {
                model.wrongGiven.insert(resource)
                model.unanswerable.append(
                    .init(resource: resource, expectation: expectation, since: log.withLock { $0.count }))
            }
            await manager.enqueue(url, options: options)
        case 42..<52:
            trace.append("\(step): suspend r\(resource)")
            model.allow("suspended", for: resource)
            markPaused([resource])
            await manager.suspend(url)
        case 52..<62:
            trace.append("\(step): resume r\(resource)")
            pausedByCaller.remove(resource)
            await manager.resume(url)
        case 62..<67:
            trace.append("\(step): remove r\(resource)")
            forget(resource)
            await manager.remove(url)
        case 67..<71:
            trace.append("\(step): forget r\(resource)")
            // A completed file (also one a newer version would replace) stays: it is the user's now.
            let partials = directory.appendingPathComponent(".downloader").standardizedFileURL.path + "/"
            if let receipt = await manager.receipt(for: url), !receipt.fileURL.path.hasPrefix(partials) {
                forgotten[receipt.fileURL.standardizedFileURL] = resource
            }
            forgottenResources.insert(resource)
            forget(resource)
            await manager.forget(url)
        case 71..<74:
            trace.append("\(step): suspendAll")
            model.allow("suspended", for: nil)
            markPaused(Array(0..<model.resources.count))
            await manager.suspendAll()
        case 74..<77:
            trace.append("\(step): resumeAll")
            pausedByCaller.removeAll()
            await manager.resumeAll()
        case 77..<82:
            trace.append("\(step): restart")
            try await restart()
        case 82..<85:
            trace.append("\(step): kill -9 a child")
            try await killChild()
        case 85..<89:
            batchStep(step)
        case 89..<93:
            trace.append("\(step): settle")
            await settle()
        default:
            // Let the transfers move on a little: a random number of body bytes, or nothing to wait for.
            let bytes = Int64.random(in: 1...200_000, using: &random)
            let target = server.statistics.bodyBytesSent + bytes
            trace.append("\(step): wait for \(bytes) bytes")
            _ = await server.waitUntil(timeout: .seconds(1)) { $0.bodyBytesSent >= target }
        }
    }

    func describe(_ options: DownloadOptions) -> String {
        var parts: [String] = []
        if let checksum = options.checksum { parts.append(String(checksum.description.prefix(16))) }
        if case .custom(let name) = options.naming { parts.append(name) }
        if options.priority != 0 { parts.append("p\(options.priority)") }
        return parts.joined(separator: " ")
    }

    /// A caller paused these resources: a pause the restart policy must keep — unless a `download` call of the
    /// resource is still on its way, which may reach the manager after the pause and continue it.
    func markPaused(_ resources: [Int]) {
        for resource in resources {
            if let id = downloadCallers[resource], outcomes.withLock({ $0[id] == nil }) {
                pausedByCaller.remove(resource)
            } else {
                pausedByCaller.insert(resource)
            }
        }
    }

    /// A removed or forgotten download: its callers end, its wrong expectations were dropped with it.
    func forget(_ resource: Int) {
        pausedByCaller.remove(resource)
        model.allow("cancelled", for: resource)
        model.known.remove(resource)
        model.unanswerable.removeAll { $0.resource == resource }
    }

    func restart() async throws {
        let moving = await manager.allReceipts.filter { $0.state == .queued || $0.state == .downloading }
        let active = Set(moving.map(\.url))
        await shutDown()
        let before = await manager.allReceipts
        checkInterruptions(before, stoppedByShutdown: active)
        continuing = Int.random(in: 0..<3, using: &random) == 0
        trace.append(continuing ? "open, continuing interrupted downloads" : "open")
        try await open()
        let after = await manager.allReceipts
        checkRestored(before, after, exact: true)
        await checkContinuation()
    }

    /// Shuts the manager down, lets a child process ask for some downloads on the same directory and kills it with
    /// SIGKILL at a random moment, then opens a new manager.
    func killChild() async throws {
        await shutDown()
        let before = await manager.allReceipts
        let savedBefore = savedExpectations()
        struct Request: Codable {
            var url: URL
            var options: DownloadOptions
        }
        var requests: [Request] = []
        var asked: [String] = []
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            let resource = Int.random(in: 0..<model.resources.count, using: &random)
            let options = options(for: resource).0
            model.noteRequest(for: resource, choosesName: options.chosenNaming != nil)
            pausedByCaller.remove(resource)  // the child's request continues it
            requests.append(Request(url: model.resources[resource].url, options: options))
            asked.append("r\(resource) \(describe(options))")
        }
        trace.append("the child asks for \(asked.joined(separator: ", "))")
        let json = String(decoding: try JSONEncoder().encode(requests), as: UTF8.self)
        // SpawnedProcess, not Foundation's Process: its run() crashes now and then on Swift 6.3 (see SpawnedProcess).
        let child = try SpawnedProcess(
            executable: ModelRun.built("downloader-model-child"),
            arguments: [directory.path, String(maximumActive), json],
            environment: ProcessInfo.processInfo.environment, directory: directory)
        let target = server.statistics.bodyBytesSent + Int64.random(in: 0...400_000, using: &random)
        let killed = await server.waitUntil(timeout: .seconds(5)) { statistics in
            guard statistics.bodyBytesSent >= target else { return false }
            child.send(SIGKILL)  // that process only (its pid may name another once it is reaped)
            return true
        }
        // It finished its work, or never reached the target: kill it now, if it has not exited (once reaped, its pid
        // may be another process's).
        if !killed { child.send(SIGKILL) }
        let status = await RawHTTPClient.onThread { child.waitUntilExit() }
        trace.append("child ended \(status == 128 + SIGKILL ? "by SIGKILL" : "by itself")")
        // Under ThreadSanitizer the child is instrumented too: a race it reports fails the run (its exit status says
        // nothing when it was killed).
        let errors = String(decoding: child.output.stderr, as: UTF8.self)
        if errors.contains("ThreadSanitizer") { note("the child reported: \(errors.prefix(2_000))") }
        // What the child told its user counts as said (epoch 0: no manager of this process), for what it was asked.
        let position = log.withLock { $0.count }
        let told = String(decoding: child.output.stdout, as: UTF8.self)
        for line in told.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
            guard parts.count == 2, let url = URL(string: parts[1]) else { continue }
            log.withLock { $0.append((0, .warning(url, reason: "the child said: \(parts[0])"))) }
        }
        // What the child saved is asked: its new wrong expectations of unfinished downloads must be said later.
        let saved = savedExpectations()
        continuing = Int.random(in: 0..<3, using: &random) == 0
        trace.append(continuing ? "open, continuing interrupted downloads" : "open")
        try await open()
        let after = await manager.allReceipts
        checkRestored(before, after, exact: false)
        await checkContinuation()
        for receipt in after where receipt.state != .completed {
            guard let resource = model.resources.firstIndex(where: { $0.url == receipt.url }) else { continue }
            let new = (saved[receipt.url] ?? []).filter { !(savedBefore[receipt.url] ?? []).contains($0) }
            for expectation in new where !model.resources[resource].isTrue(expectation) {
                model.wrongGiven.insert(resource)
                model.unanswerable.append(.init(resource: resource, expectation: expectation, since: position))
            }
        }
    }

    /// The expected checksums the journal keeps for each download.
    func savedExpectations() -> [URL: [Checksum]] {
        let journal = directory.appendingPathComponent(".downloader/journal")
        guard let data = try? Data(contentsOf: journal) else { return [:] }
        var saved: [URL: [Checksum]] = [:]
        for line in ReceiptJournal.Lines(data).entries(in: data).entries {
            saved[line.entry.url] = line.entry.expectations.all
        }
        return saved
    }

    static func built(_ name: String) -> URL {
        BuiltProducts.url(name)
    }
}
