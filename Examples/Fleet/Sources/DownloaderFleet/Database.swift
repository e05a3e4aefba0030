import FleetCore
import Foundation
import Logging
import PostgresNIO

/// The fleet's PostgreSQL: the connection (`--db URL` or `DATABASE_URL`), the schema (created or migrated on first
/// use) and every statement the commands run. Shards are claimed with `SELECT … FOR UPDATE SKIP LOCKED` under a lease
/// whose token fences every later write (`LeaseRules` is the same rules as values).
struct Database: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// Reads `postgres://user[:password]@host[:port]/database`.
    /// - Throws: `FleetError` for another shape.
    static func configuration(from text: String) throws -> PostgresClient.Configuration {
        guard let url = URLComponents(string: text), ["postgres", "postgresql"].contains(url.scheme ?? ""),
            let host = url.host, !host.isEmpty, let user = url.user, !user.isEmpty
        else {
            throw FleetError(
                "the database URL is postgres://user[:password]@host[:port]/database, not \(Self.redacted(text))")
        }
        let database = url.path.hasPrefix("/") ? String(url.path.dropFirst()) : url.path
        var configuration = PostgresClient.Configuration(
            host: host, port: url.port ?? 5432, username: user, password: url.password,
            database: database.isEmpty ? nil : database, tls: .disable)
        configuration.options.connectTimeout = .seconds(5)
        configuration.options.maximumConnections = 4
        return configuration
    }

    /// The URL with its password hidden, for messages.
    static func redacted(_ text: String) -> String {
        guard var url = URLComponents(string: text), url.password != nil else { return text }
        url.password = "***"
        return url.string ?? text
    }

    // MARK: - Schema

    /// The schema's version; `migrate()` brings an older one up to it.
    static let schemaVersion = 1

    /// Creates the tables, or migrates them, once per database: under an advisory lock, so that workers starting
    /// together do not race.
    func migrate() async throws {
        // Once the schema is current, no DDL at all: `CREATE INDEX IF NOT EXISTS` takes a share lock on its table even
        // when the index exists, so it waits for any worker's open transaction (one stopped mid-commit) and every later
        // update queues behind it. Seen in the chaos trials: `status` stuck behind a SIGSTOPped worker, and the fleet
        // with it, until that worker went on.
        if try await schemaIsCurrent() { return }
        try await client.withTransaction(logger: logger) { connection in
            try await connection.run("SELECT pg_advisory_xact_lock(4902049)", logger: logger)
            for statement in Self.schema {
                try await connection.run(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
            try await connection.run(
                """
                INSERT INTO fleet_meta (key, value) VALUES ('schema', \(String(Self.schemaVersion)))
                ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
                """, logger: logger)
        }
    }

    /// Whether the database has this schema version already (`false` when it has no schema yet).
    private func schemaIsCurrent() async throws -> Bool {
        let exists =
            try await client.query(
                "SELECT to_regclass('fleet_meta') IS NOT NULL", logger: logger
            ).decode(Bool.self).all().first ?? false
        guard exists else { return false }
        let version = try await client.query(
            "SELECT value FROM fleet_meta WHERE key = 'schema'", logger: logger
        ).decode(String.self).all().first
        return version == String(Self.schemaVersion)
    }

    static let schema = [
        "CREATE TABLE IF NOT EXISTS fleet_meta (key text PRIMARY KEY, value text NOT NULL)",
        """
        CREATE TABLE IF NOT EXISTS fleet_shards (
            id bigserial PRIMARY KEY, job text NOT NULL, urls integer NOT NULL DEFAULT 0,
            remaining integer NOT NULL DEFAULT 0, holder text, token bigint NOT NULL DEFAULT 0, lease_until timestamptz)
        """,
        "CREATE INDEX IF NOT EXISTS fleet_shards_open ON fleet_shards (job, id) WHERE remaining > 0",
        """
        CREATE TABLE IF NOT EXISTS fleet_urls (
            job text NOT NULL, url text NOT NULL, shard bigint NOT NULL, status text, path text, size bigint,
            digest text, error text, node text, finished timestamptz, PRIMARY KEY (job, url))
        """,
        "CREATE INDEX IF NOT EXISTS fleet_urls_shard ON fleet_urls (shard) WHERE status IS NULL",
        """
        CREATE TABLE IF NOT EXISTS fleet_nodes (
            job text NOT NULL, node text NOT NULL, done bigint NOT NULL DEFAULT 0, bytes bigint NOT NULL DEFAULT 0,
            last_seen timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (job, node))
        """,
    ]

    // MARK: - add

    /// Adds one shard of a job's list: URLs the job has already are not added again.
    /// - Returns: how many URLs were added.
    func addShard(job: String, urls: [String]) async throws -> Int {
        try await client.withTransaction(logger: logger) { connection in
            let id =
                try await connection.run(
                    "INSERT INTO fleet_shards (job) VALUES (\(job)) RETURNING id", logger: logger
                ).decode(Int64.self).all().first ?? 0
            let added =
                try await connection.run(
                    """
                    WITH added AS (
                        INSERT INTO fleet_urls (job, url, shard) SELECT \(job), u, \(id) FROM unnest(\(urls)::text[]) AS u
                        ON CONFLICT DO NOTHING RETURNING 1)
                    SELECT count(*)::bigint FROM added
                    """, logger: logger
                ).decode(Int64.self).all().first ?? 0
            if added == 0 {
                try await connection.run("DELETE FROM fleet_shards WHERE id = \(id)", logger: logger)
            } else {
                try await connection.run(
                    "UPDATE fleet_shards SET urls = \(Int32(added)), remaining = \(Int32(added)) WHERE id = \(id)",
                    logger: logger)
            }
            return Int(added)
        }
    }

    // MARK: - work

    /// Claims the first open shard nobody holds, with a new token and a lease of `lease` seconds.
    /// - Returns: the claim (`nil` when every open shard is held), and whether no open shard is left at all.
    func claim(job: String, node: String, lease: Double) async throws -> (LeaseRules.Claim?, allDone: Bool) {
        let claimed = try await client.query(
            """
            UPDATE fleet_shards SET holder = \(node), token = token + 1,
                lease_until = now() + make_interval(secs => \(lease))
            WHERE id = (
                SELECT id FROM fleet_shards WHERE job = \(job) AND remaining > 0
                    AND (lease_until IS NULL OR lease_until < now())
                ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
            RETURNING id, token
            """, logger: logger
        ).decode((Int64, Int64).self).all().first
        if let (id, token) = claimed { return (LeaseRules.Claim(shard: id, token: token), false) }
        let open =
            try await client.query(
                "SELECT count(*)::bigint FROM fleet_shards WHERE job = \(job) AND remaining > 0", logger: logger
            ).decode(Int64.self).all().first ?? 0
        return (nil, open == 0)
    }

    /// The URLs of a claim without a result.
    func remaining(of claim: LeaseRules.Claim) async throws -> [String] {
        try await client.query(
            "SELECT url FROM fleet_urls WHERE shard = \(claim.shard) AND status IS NULL ORDER BY url", logger: logger
        ).decode(String.self).all()
    }

    /// Renews a claim's lease. - Returns: whether the claim still holds.
    func renew(_ claim: LeaseRules.Claim, lease: Double) async throws -> Bool {
        try await !client.query(
            """
            UPDATE fleet_shards SET lease_until = now() + make_interval(secs => \(lease))
            WHERE id = \(claim.shard) AND token = \(claim.token) AND lease_until > now() RETURNING id
            """, logger: logger
        ).decode(Int64.self).all().isEmpty
    }

    /// Commits results while the claim holds (else nothing: the fence). A URL with a result keeps it.
    /// - Parameters:
    ///   - handingBack: also give the shard back, in the same transaction (a stop's last commit).
    /// - Returns: whether the claim held.
    func commit(
        _ lines: [ResultLine], job: String, node: String, claim: LeaseRules.Claim, handingBack: Bool = false
    ) async throws -> Bool {
        try await client.withTransaction(logger: logger) { connection in
            let holds = try await connection.run(
                """
                SELECT id FROM fleet_shards WHERE id = \(claim.shard) AND token = \(claim.token)
                    AND lease_until > now() FOR UPDATE
                """, logger: logger
            ).decode(Int64.self).all()
            guard !holds.isEmpty else { return false }
            let urls = lines.map(\.url)
            let statuses = lines.map(\.status)
            let paths = lines.map { $0.path ?? "" }
            let sizes = lines.map { $0.size ?? -1 }
            let digests = lines.map { $0.digest ?? "" }
            let errors = lines.map { $0.error ?? "" }
            let (count, bytes) =
                try await connection.run(
                    """
                    WITH done AS (
                        UPDATE fleet_urls AS u SET status = r.status, path = NULLIF(r.path, ''),
                            size = NULLIF(r.size, -1), digest = NULLIF(r.digest, ''), error = NULLIF(r.error, ''),
                            node = \(node), finished = now()
                        FROM unnest(\(urls)::text[], \(statuses)::text[], \(paths)::text[], \(sizes)::bigint[],
                            \(digests)::text[], \(errors)::text[]) AS r(url, status, path, size, digest, error)
                        WHERE u.job = \(job) AND u.url = r.url AND u.shard = \(claim.shard) AND u.status IS NULL
                        RETURNING u.status, u.size)
                    SELECT count(*)::bigint, coalesce(sum(size) FILTER (WHERE status = 'ok'), 0)::bigint FROM done
                    """, logger: logger
                ).decode((Int64, Int64).self).all().first ?? (Int64(0), Int64(0))
            try await connection.run(
                """
                UPDATE fleet_shards SET remaining = remaining - \(Int32(count)),
                    holder = CASE WHEN remaining - \(Int32(count)) <= 0 THEN NULL ELSE holder END,
                    lease_until = CASE WHEN remaining - \(Int32(count)) <= 0 THEN NULL ELSE lease_until END
                WHERE id = \(claim.shard)
                """, logger: logger)
            try await connection.run(
                """
                INSERT INTO fleet_nodes (job, node, done, bytes, last_seen) VALUES (\(job), \(node), \(count), \(bytes), now())
                ON CONFLICT (job, node) DO UPDATE SET done = fleet_nodes.done + EXCLUDED.done,
                    bytes = fleet_nodes.bytes + EXCLUDED.bytes, last_seen = now()
                """, logger: logger)
            if handingBack { try await connection.run(Self.handBackQuery(claim), logger: logger) }
            return true
        }
    }

    /// Gives a claim's shard back: free at once for another worker.
    func handBack(_ claim: LeaseRules.Claim) async throws {
        try await client.query(Self.handBackQuery(claim), logger: logger)
    }

    /// The hand-back's statement (alone, or in a stop's last commit): the lease ends at once, for this token only.
    private static func handBackQuery(_ claim: LeaseRules.Claim) -> PostgresQuery {
        """
        UPDATE fleet_shards SET holder = NULL, lease_until = NULL
        WHERE id = \(claim.shard) AND token = \(claim.token)
        """
    }

    /// Says the node is alive (for `status`), without results.
    func seen(job: String, node: String) async throws {
        try await client.query(
            """
            INSERT INTO fleet_nodes (job, node, last_seen) VALUES (\(job), \(node), now())
            ON CONFLICT (job, node) DO UPDATE SET last_seen = now()
            """, logger: logger)
    }

    // MARK: - status and results

    struct Status: Encodable {
        struct Node: Encodable {
            var node: String
            var done: Int64
            var bytes: Int64
            var lastSeen: String
        }
        var job: String
        var urls: Int64
        var done: Int64
        var failed: Int64
        var remaining: Int64
        var nodes: [Node]
    }

    func status(job: String) async throws -> Status {
        let (urls, done, failed) =
            try await client.query(
                """
                SELECT count(*)::bigint, (count(*) FILTER (WHERE status = 'ok'))::bigint,
                    (count(*) FILTER (WHERE status = 'failed'))::bigint
                FROM fleet_urls WHERE job = \(job)
                """, logger: logger
            ).decode((Int64, Int64, Int64).self).all().first ?? (Int64(0), Int64(0), Int64(0))
        var nodes: [Status.Node] = []
        let rows = try await client.query(
            """
            SELECT node, done, bytes, to_char(last_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
            FROM fleet_nodes WHERE job = \(job) ORDER BY node
            """, logger: logger)
        for try await (node, count, bytes, seen) in rows.decode((String, Int64, Int64, String).self) {
            nodes.append(Status.Node(node: node, done: count, bytes: bytes, lastSeen: seen))
        }
        return Status(job: job, urls: urls, done: done, failed: failed, remaining: urls - done - failed, nodes: nodes)
    }

    /// Every URL of the job with a final result, in the order they were added, as they stream from the database.
    func results(job: String, _ each: (ResultLine) -> Void) async throws {
        let rows = try await client.query(
            """
            SELECT url, status, path, size, digest, error, coalesce(node, ''),
                to_char(finished AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
            FROM fleet_urls WHERE job = \(job) AND status IS NOT NULL ORDER BY shard, url
            """, logger: logger)
        for try await (url, status, path, size, digest, error, node, time) in rows.decode(
            (String, String, String?, Int64?, String?, String?, String, String).self)
        {
            each(
                ResultLine(
                    url: url, status: status, path: path, size: size, digest: digest, time: time, error: error,
                    node: node))
        }
    }
}

/// A database error in a line: the server's message, or what failed on the way (PostgresNIO's own descriptions hide
/// both, and their debug descriptions run to a screen).
func describe(_ error: any Error) -> String {
    switch error {
    case let error as PostgresTransactionError:
        let inner = error.beginError ?? error.closureError ?? error.commitError ?? error.rollbackError
        return inner.map(describe) ?? "the transaction failed"
    case let error as PSQLError:
        if let message = error.serverInfo?[.message] {
            return "\(message) (\(error.serverInfo?[.sqlState] ?? "?"))"
        }
        if let underlying = error.underlying { return "\(error.code): \(describe(underlying))" }
        return "\(error.code)"
    default:
        return "\(error)"
    }
}

/// A fleet command's failure: said on stderr, exit 1.
struct FleetError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

extension PostgresConnection {
    /// Runs a query (a `PostgresQuery` literal with its binds) and returns its rows.
    @discardableResult
    func run(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence {
        try await self.query(query, logger: logger)
    }
}

extension AsyncSequence {
    /// Every element, in order.
    func all() async throws -> [Element] {
        var elements: [Element] = []
        for try await element in self { elements.append(element) }
        return elements
    }
}
