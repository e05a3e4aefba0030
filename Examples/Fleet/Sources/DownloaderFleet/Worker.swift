import Downloader
import FleetCore
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle

/// `downloader-fleet work`: carries out a `WorkerMachine`'s actions against PostgreSQL and one `DownloadManager`.
///
/// A claimed shard's URLs without a result go to the manager through its batch API, one as a slot frees; each
/// verified file or final failure becomes a result line, committed at least once a second while the lease holds (the
/// token fences it). The lease is renewed every third of its length. A lost connection keeps the downloads going while
/// the lease holds by the worker's own clock (`LeaseDeadline`): results wait in memory and are committed once the
/// database answers again (a claim is asked for again with a backoff up to 10 s). Once the lease has ended by that
/// clock — the database refuses the claim's commits from then on — no download of the shard starts, and the next tick
/// gives the shard up. SIGTERM (graceful shutdown) stops claiming, commits what finished, hands the shard back and
/// ends; after 4.5 s it exits anyway.
///
/// Every database call has a deadline (`callDeadline`): one that does not answer counts as failed. Seen in the e2e
/// trial: a worker stopped (SIGSTOP) while PostgreSQL restarted had every later call wait forever on PostgresNIO's
/// pool, silently, and never learnt that its job was done. After two unanswered calls in a row the worker starts a
/// new client (a new pool) and leaves the old one.
actor Worker {
    typealias Claim = LeaseRules.Claim

    private var database: Database
    /// What a new client is made of when the current one stops answering.
    private let clientConfiguration: PostgresClient.Configuration
    private let clientLogger: Logger
    /// The run of a client made after the first (the first runs in the command's service group).
    private var replacementRun: Task<Void, Never>?
    /// Database calls in a row that did not answer within `callDeadline`.
    private var unanswered = 0
    let manager: DownloadManager
    let job: String
    let node: String
    /// Seconds a claim holds without a renewal.
    let lease: Double
    let logger: Logger
    private var machine: WorkerMachine
    /// The claim being downloaded, and the task that reads its outcomes.
    private var current: (claim: Claim, task: Task<Void, Never>)?
    private var ended: CheckedContinuation<Void, Never>?
    private var isOver = false
    private var claimBackoff: Double = 1
    private var ticks = 0
    /// When the current claim's lease ends by this worker's clock: no download starts after it.
    private let leaseDeadline = LeaseDeadline()

    init(
        database: Database, clientConfiguration: PostgresClient.Configuration, clientLogger: Logger,
        manager: DownloadManager, job: String, node: String, lease: Double, exitsWhenDone: Bool
    ) {
        self.database = database
        self.clientConfiguration = clientConfiguration
        self.clientLogger = clientLogger
        self.manager = manager
        self.job = job
        self.node = node
        self.lease = lease
        logger = database.logger
        machine = WorkerMachine(exitsWhenDone: exitsWhenDone)
    }

    /// Works until the job is done (`--exit-when-done`) or `stop()` ended it.
    func run() async {
        let ticker = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                await self?.tick()
            }
        }
        await perform(machine.start())
        if !isOver { await withCheckedContinuation { ended = $0 } }
        ticker.cancel()
        current?.task.cancel()
        await manager.shutdown()
        replacementRun?.cancel()
    }

    /// Seconds a database call may take before it counts as failed: a third of the lease, at least 5.
    private var callDeadline: Double { max(5, lease / 3) }

    /// Runs one database call against the current client, within `callDeadline`.
    /// - Throws: the call's error, or `FleetError` when it did not answer in time.
    private func call<T: Sendable>(_ operation: @escaping @Sendable (Database) async throws -> T) async throws -> T {
        let database = self.database
        do {
            let value = try await answered(within: callDeadline) { try await operation(database) }
            unanswered = 0
            return value
        } catch let error as Unanswered {
            unanswered += 1
            if unanswered >= 2 { replaceClient() }
            throw FleetError("the database did not answer within \(error.seconds) s")
        }
    }

    /// A new client (and pool) in place of one that stopped answering; the old one's calls are left to end.
    private func replaceClient() {
        logger.warning("the database did not answer \(unanswered) calls in a row: starting a new connection pool")
        unanswered = 0
        replacementRun?.cancel()
        let client = PostgresClient(configuration: clientConfiguration, backgroundLogger: clientLogger)
        replacementRun = Task { await client.run() }
        database = Database(client: client, logger: logger)
    }

    /// SIGTERM: stop claiming, commit what finished, hand the shard back, end.
    func stop() async {
        logger.info("stopping: no more claims; the shard goes back")
        await perform(machine.stop())
    }

    private func tick() async {
        ticks += 1
        let renewDue = ticks % max(1, Int(lease / 3)) == 0
        if ticks % 5 == 0 { try? await call { try await $0.seen(job: self.job, node: self.node) } }
        if case .working(let claim) = machine.phase, !leaseDeadline.holds(claim) {
            // Stopped or cut off past the lease: the database refuses this claim's renewals and commits from now on,
            // and another worker may have the shard already. Given up at once, not at the next call's answer.
            logger.warning("the lease of shard \(claim.shard) ended by this worker's clock: the shard is given up")
            await perform(machine.renewalEnded(claim, lost: true))
            return
        }
        await perform(machine.tick(renewDue: renewDue))
    }

    private func perform(_ actions: [WorkerMachine.Action]) async {
        for action in actions {
            switch action {
            case .claim:
                await claim()
            case .download(let claim):
                await download(claim)
            case .commit(let outcomes, let claim):
                if case .stopping = machine.phase {
                    logger.info("stopping: committing \(outcomes.count) results first")
                }
                await commit(outcomes, claim)
            case .commitAndHandBack(let outcomes, let claim):
                logger.info("stopping: committing \(outcomes.count) results and handing shard \(claim.shard) back")
                await commit(outcomes, claim, handingBack: true)
            case .renew(let claim):
                do {
                    let sent = ContinuousClock.now
                    let holds = try await call { try await $0.renew(claim, lease: self.lease) }
                    if holds {
                        leaseDeadline.granted(claim, sentAt: sent, lease: lease)
                    } else {
                        logger.warning("lost the lease of shard \(claim.shard): another worker has it")
                    }
                    await perform(machine.renewalEnded(claim, lost: !holds))
                } catch {
                    logger.warning("could not renew the lease of shard \(claim.shard): \(describe(error))")
                }
            case .abandon(let claim):
                if current?.claim == claim {
                    current?.task.cancel()  // the batch suspends what is in flight
                    current = nil
                }
            case .handBack(let claim):
                logger.info("handing shard \(claim.shard) back")
                do { try await call { try await $0.handBack(claim) } } catch {
                    logger.warning(
                        "could not hand shard \(claim.shard) back (its lease ends by itself): \(describe(error))")
                }
            case .waitAndClaim:
                let delay = claimBackoff
                claimBackoff = min(10, claimBackoff * 2)
                Task { [weak self] in
                    try? await Task.sleep(for: .seconds(delay))
                    guard let self else { return }
                    await self.perform(self.waitedActions())
                }
            case .exitDone:
                logger.info("the job is done")
                finish()
            case .exit:
                finish()
            }
        }
    }

    private func waitedActions() -> [WorkerMachine.Action] { machine.waited() }

    private func finish() {
        isOver = true
        ended?.resume()
        ended = nil
    }

    private func claim() async {
        do {
            let sent = ContinuousClock.now
            let (claim, allDone) = try await call {
                try await $0.claim(job: self.job, node: self.node, lease: self.lease)
            }
            if let claim { leaseDeadline.granted(claim, sentAt: sent, lease: lease) }
            claimBackoff = 1
            if let claim { logger.info("claimed shard \(claim.shard) (token \(claim.token))") }
            await perform(machine.claimed(claim, allDone: allDone))
        } catch {
            logger.warning("could not claim a shard (tried again shortly): \(describe(error))")
            await perform(machine.claimed(nil, allDone: false))
        }
    }

    private func download(_ claim: Claim) async {
        let urls: [String]
        do {
            urls = try await call { try await $0.remaining(of: claim) }
        } catch {
            logger.warning("could not read shard \(claim.shard): \(describe(error))")
            await perform(machine.renewalEnded(claim, lost: true))
            return
        }
        var texts: [URL: String] = [:]
        var requests: [DownloadRequest] = []
        for text in urls {
            guard let url = URL(string: text) else { continue }
            texts[url] = text
            requests.append(DownloadRequest(url))
        }
        let manager = self.manager
        let node = self.node
        // Read one at a time as slots free (no queue behind the running downloads), and none once the lease has
        // ended by this worker's clock: a worker that runs again after a stop past its lease starts nothing that the
        // shard's next holder fetches too (each ending download would otherwise start the next of the shard until a
        // commit or a renewal is refused).
        let deadline = leaseDeadline
        let inFlight = await manager.maximumActiveDownloads
        let task = Task { [weak self] in
            let gated = requests.lazy.prefix { _ in deadline.holds(claim) }
            for await outcome in manager.download(gated, maximumInFlight: inFlight) {
                guard let text = texts[outcome.request.url], let line = Self.line(outcome, url: text, node: node)
                else { continue }
                await self?.finished(WorkerMachine.Outcome(url: text, line: line), of: claim)
            }
            await self?.downloadsEnded(claim)
        }
        current = (claim, task)
        // URLs that are not URLs have a result too: failed.
        for text in urls where URL(string: text) == nil {
            await finished(
                WorkerMachine.Outcome(
                    url: text,
                    line: ResultLine(url: text, status: "failed", time: Self.now(), error: "not a URL", node: node)),
                of: claim)
        }
    }

    private func finished(_ outcome: WorkerMachine.Outcome, of claim: Claim) async {
        await perform(machine.finished(outcome, of: claim))
    }

    private func downloadsEnded(_ claim: Claim) async {
        if current?.claim == claim { current = nil }
        await perform(machine.downloadsFinished(claim))
    }

    private func commit(_ outcomes: [WorkerMachine.Outcome], _ claim: Claim, handingBack: Bool = false) async {
        let end: WorkerMachine.CommitEnd
        do {
            let lines = outcomes.map(\.line)
            let held = try await call {
                try await $0.commit(lines, job: self.job, node: self.node, claim: claim, handingBack: handingBack)
            }
            end = held ? .accepted : .fenced
            if !held { logger.warning("shard \(claim.shard) moved on: \(outcomes.count) results not committed") }
        } catch {
            logger.warning("could not commit \(outcomes.count) results (kept, tried again): \(describe(error))")
            end = .failed
        }
        await perform(machine.committed(outcomes, for: claim, end))
    }

    /// A final outcome as a result line; `nil` for one that is not final (suspended, cancelled: the URL stays open).
    static func line(_ outcome: DownloadOutcome, url: String, node: String) -> ResultLine? {
        switch outcome.result {
        case .success(let receipt):
            return ResultLine(
                url: url, status: "ok", path: receipt.fileURL.path, size: receipt.totalBytesWritten,
                digest: receipt.checksum?.description, time: now(), node: node)
        case .failure(let error):
            if [DownloadError.suspended, .cancelled, .shutDown].contains(error) { return nil }
            return ResultLine(url: url, status: "failed", time: now(), error: error.reason, node: node)
        }
    }

    static func now() -> String { Date().formatted(.iso8601) }
}

/// The worker as a service of the group that also runs the database client: SIGTERM reaches it as a graceful
/// shutdown, and its end (the job done) shuts the group down.
struct WorkerService: Service {
    let worker: Worker

    func run() async throws {
        await withGracefulShutdownHandler {
            await worker.run()
            // The job is done: the service group now stops the database client, which a wedged pool could hold up.
            exit(after: 5)
        } onGracefulShutdown: {
            // The stop must end within 5 s of the signal, whatever the database does.
            exit(after: 4.5)
            Task { await worker.stop() }
        }
    }

    /// Ends the process (status 0, output flushed) `seconds` from now, whatever the tasks are waiting for.
    private func exit(after seconds: Double) {
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: seconds)
            fflush(nil)
            _exit(0)
        }
    }
}
