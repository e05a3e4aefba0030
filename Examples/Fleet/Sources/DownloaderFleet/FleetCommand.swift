import ArgumentParser
import Downloader
import FleetCore
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle

@main
struct FleetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "downloader-fleet",
        abstract: "Many workers share one list of URLs through PostgreSQL.",
        discussion: """
            A job's list is cut into shards (add). Each worker (work) claims one shard at a time under a lease, downloads \
            its URLs with a DownloadManager, and commits each result while the lease holds; a worker that dies or stalls \
            past its lease loses the shard to another, and nothing it commits afterwards counts. The database is \
            --db URL or DATABASE_URL (postgres://user[:password]@host:port/db); the schema is created on first use.
            """,
        subcommands: [Add.self, Work.self, Status.self, Results.self])
}

/// What every subcommand takes: the database and the job.
struct Connection: ParsableArguments {
    @Option(name: .long, help: "The database: postgres://user[:password]@host:port/db (default: DATABASE_URL).")
    var db: String?

    @Option(name: .long, help: "The job: one list and its results (default: default).")
    var job = "default"

    /// Opens the database (its client runs in `body`'s service group, or in a task of its own) and migrates it.
    func withDatabase<Result: Sendable>(
        logger: Logger, _ body: @Sendable (Database) async throws -> Result
    ) async throws -> Result {
        guard let text = db ?? ProcessInfo.processInfo.environment["DATABASE_URL"] else {
            throw FleetError("no database: give --db URL or set DATABASE_URL")
        }
        let client = PostgresClient(
            configuration: try Database.configuration(from: text), backgroundLogger: backgroundLogger(logger))
        let running = Task { await client.run() }
        defer { running.cancel() }
        let database = Database(client: client, logger: logger)
        do {
            try await database.migrate()
            return try await body(database)
        } catch let error as FleetError {
            throw error
        } catch {
            throw FleetError("the database (\(Database.redacted(text))): \(describe(error))")
        }
    }
}

/// PostgresNIO's own logger: warnings and worse (each failed connection attempt is `info`), unless FLEET_LOG says.
func backgroundLogger(_ logger: Logger) -> Logger {
    var quieter = logger
    if ProcessInfo.processInfo.environment["FLEET_LOG"] == nil { quieter.logLevel = .warning }
    return quieter
}

func makeLogger(_ label: String) -> Logger {
    var logger = Logger(label: label) { QuietEarlyLease(inner: StreamLogHandler.standardError(label: $0)) }
    logger.logLevel = ProcessInfo.processInfo.environment["FLEET_LOG"].flatMap { Logger.Level(rawValue: $0) } ?? .info
    return logger
}

extension FleetCommand {
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Adds a list of URLs to a job (one a line, # comments); a URL the job has already is not added.")

        @OptionGroup var connection: Connection

        @Option(name: .long, help: "URLs per shard (default 1000).")
        var shardSize = 1000

        @Argument(help: "The list: a file, or - for stdin (read as it streams).")
        var file: String

        func run() async throws {
            let logger = makeLogger("downloader-fleet.add")
            let (job, size, file) = (connection.job, shardSize, self.file)
            let (read, added) = try await connection.withDatabase(logger: logger) { database in
                try await Self.add(file: file, job: job, shardSize: size, database: database)
            }
            print("added \(added) of \(read) URLs to job \(job)")
        }

        /// Streams the list into shards. - Returns: URLs read and URLs added.
        static func add(file: String, job: String, shardSize: Int, database: Database) async throws -> (Int, Int) {
            let handle: FileHandle
            if file == "-" {
                handle = .standardInput
            } else {
                guard let opened = FileHandle(forReadingAtPath: file) else { throw FleetError("cannot read \(file)") }
                handle = opened
            }
            var list = URLList(shardSize: shardSize)
            var read = 0
            var added = 0
            var partial = Data()
            while true {
                let chunk = handle.readData(ofLength: 1 << 20)
                partial.append(chunk)
                var lines = partial.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
                partial = chunk.isEmpty ? Data() : Data(lines.removeLast())
                if chunk.isEmpty && lines.last?.isEmpty == true { lines.removeLast() }
                for line in lines {
                    guard let shard = list.line(Substring(String(decoding: line, as: UTF8.self))) else { continue }
                    read += shard.count
                    added += try await database.addShard(job: job, urls: shard)
                }
                if chunk.isEmpty { break }
            }
            if let shard = list.end() {
                read += shard.count
                added += try await database.addShard(job: job, urls: shard)
            }
            return (read, added)
        }
    }

    struct Work: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Claims shards one at a time and downloads their URLs into DIR, committing each result.")

        @OptionGroup var connection: Connection

        @Option(name: .long, help: "Where the files go (the state in DIR/.fleet).")
        var dir: String

        @Option(name: .long, help: "This worker's name in status and results (default: the host name and pid).")
        var node: String?

        @Option(name: .shortAndLong, help: "Downloads at once (default 8).")
        var j = 8

        @Option(name: .long, help: "Seconds a claim holds without a renewal (default 30; renewed every third).")
        var lease: Double = 30

        @Flag(name: .long, help: "End once no shard of the job is left open (else wait for more).")
        var exitWhenDone = false

        func validate() throws {
            guard j >= 1 else { throw ValidationError("-j needs 1 or more") }
            guard lease >= 3 else { throw ValidationError("--lease needs 3 seconds or more") }
        }

        func run() async throws {
            let logger = makeLogger("downloader-fleet.work")
            let node = self.node ?? "\(ProcessInfo.processInfo.hostName)-\(getpid())"
            let directory = URL(fileURLWithPath: dir, isDirectory: true).standardizedFileURL
            var configuration = DownloadManager.Configuration(directory: directory)
            configuration.completedDirectory = directory
            configuration.stateDirectory = directory.appendingPathComponent(".fleet", isDirectory: true)
            configuration.maximumActiveDownloads = j
            // A server's log tells which worker fetched what (the e2e trial counts a stopped worker's requests by it).
            configuration.userAgent = "downloader-fleet (\(node))"
            configuration.memoryBudget = max(64, 8 * j) << 20
            guard let text = connection.db ?? ProcessInfo.processInfo.environment["DATABASE_URL"] else {
                throw FleetError("no database: give --db URL or set DATABASE_URL")
            }
            let clientConfiguration = try Database.configuration(from: text)
            let client = PostgresClient(configuration: clientConfiguration, backgroundLogger: backgroundLogger(logger))
            let database = Database(client: client, logger: logger)
            let manager = try await DownloadManager.make(configuration: configuration)
            let worker = Worker(
                database: database, clientConfiguration: clientConfiguration, clientLogger: backgroundLogger(logger),
                manager: manager, job: connection.job, node: node, lease: lease, exitsWhenDone: exitWhenDone)
            let migrating = Task { [logger] in
                // The schema, once the client runs (below); tried until the database answers.
                var delay = 1.0
                while true {
                    do {
                        try await database.migrate()
                        return
                    } catch {
                        logger.warning("the database does not answer yet: \(describe(error))")
                        try? await Task.sleep(for: .seconds(delay))
                        delay = min(10, delay * 2)
                    }
                }
            }
            let group = ServiceGroup(
                configuration: .init(
                    services: [
                        .init(service: client),
                        .init(
                            service: MigratedWorker(migrating: migrating, service: WorkerService(worker: worker)),
                            successTerminationBehavior: .gracefullyShutdownGroup),
                    ], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
            try await group.run()
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "How far a job is: URLs, done, failed, left, nodes.")

        @OptionGroup var connection: Connection

        @Flag(name: .long, help: "JSON: job, urls, done, failed, remaining, nodes (node, done, bytes, lastSeen).")
        var json = false

        func run() async throws {
            let job = connection.job
            let status = try await connection.withDatabase(logger: makeLogger("downloader-fleet.status")) {
                database in
                try await database.status(job: job)
            }
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                print(String(decoding: try encoder.encode(status), as: UTF8.self))
                return
            }
            print(
                "job \(status.job): \(status.urls) URLs, \(status.done) done, \(status.failed) failed, "
                    + "\(status.remaining) left")
            if !status.nodes.isEmpty {
                print("node".padding(toLength: 32, withPad: " ", startingAt: 0) + "  done       bytes  last seen")
                for node in status.nodes {
                    let name = node.node.padding(toLength: 32, withPad: " ", startingAt: 0)
                    let done = String(node.done).leftPadded(to: 6)
                    let bytes = String(node.bytes).leftPadded(to: 12)
                    print("\(name)  \(done)  \(bytes)  \(node.lastSeen)")
                }
            }
        }
    }

    struct Results: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "One JSON line per URL with a final result (dl --result-log's keys, and node).")

        @OptionGroup var connection: Connection

        func run() async throws {
            let job = connection.job
            try await connection.withDatabase(logger: makeLogger("downloader-fleet.results")) { database in
                try await database.results(job: job) { line in print(line.json) }
            }
        }
    }
}

/// The worker, started once the schema is there.
struct MigratedWorker: Service {
    let migrating: Task<Void, Never>
    let service: WorkerService

    func run() async throws {
        await migrating.value
        try await service.run()
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}

/// stderr, less one line: PostgresNIO warns when a query is asked for before `PostgresClient.run()` has begun, which a
/// client started in a task beside its first query cannot rule out; the query waits for the pool and runs.
struct QuietEarlyLease: LogHandler {
    var inner: StreamLogHandler

    var metadataProvider: Logger.MetadataProvider? {
        get { inner.metadataProvider }
        set { inner.metadataProvider = newValue }
    }

    var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }

    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        if event.message.description.hasPrefix("Trying to lease connection from `PostgresClient`") { return }
        inner.log(event: event)
    }
}
