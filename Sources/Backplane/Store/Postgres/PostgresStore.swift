import Foundation
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
import BackplaneWire

/// The store for several backplane nodes: PostgreSQL through postgres-nio's `PostgresClient`.
///
/// Concurrency (the store contract, docs/architecture.md): transactions run at READ COMMITTED
/// (set on each, whatever the server's default),
/// and every check-and-set takes a lock before it reads what it checks, so decisions are never
/// taken on a snapshot another node is changing:
/// - a user's limits (devices, downloads): a transaction-scoped advisory lock per user, taken
///   after the lock of the device in question (always in that order);
/// - the change log: the application's row in `change_counters`, locked by the first statement
///   of every transaction that publishes or subscribes, so numbers commit in order;
/// - single rows (a command, a grant, an application's settings): `SELECT … FOR UPDATE`.
/// Locks rather than SERIALIZABLE: a conflict waits instead of failing, so a burst of
/// registrations for one user queues rather than retries. A deadlock or serialization failure
/// is still retried (`transaction`), in case a lock order is ever missed.
///
/// The client runs as a service (`run()`); queries wait for it.
public final class PostgresStore: BackplaneStore {
    let client: PostgresClient
    let logger: Logger
    /// Applications and app keys as recently read (`RecentReads`); cleared by this store's changes to them.
    let recentApplications: RecentReads<ApplicationRecord>
    /// NOTIFY and LISTEN between the nodes on this database.
    public let wakeUpRelay: (any WakeUpRelay)?
    let recentAppKeys = RecentReads<AppKeyRecord>()
    public let transactionTimings = TransactionTimings()

    /// How long a request waits for a pooled connection before it is answered 503. The pool
    /// waits without end while the database is down; a request must not. Long enough for a
    /// burst to queue behind a busy pool.
    let leaseTimeout: Duration
    /// How long a call may use its connection (all of a transaction's statements). Far longer
    /// than any request's statements take; a call past it is taken for one whose connection
    /// will never answer, and that connection is closed.
    let callTimeout: Duration

    public init(
        _ configuration: PostgresClient.Configuration, logger: Logger, leaseTimeout: Duration = .seconds(5), callTimeout: Duration = .seconds(10)
    ) {
        self.leaseTimeout = leaseTimeout
        self.callTimeout = callTimeout
        // The pool's own log keeps to errors: what it warns of (a lost connection) reaches the
        // store's callers as errors, and it warns of a query asked for in the instant before
        // `run()` starts, which every start does.
        var poolLogger = logger
        poolLogger.logLevel = max(logger.logLevel, .error)
        let client = PostgresClient(configuration: configuration, backgroundLogger: poolLogger)
        self.client = client
        self.logger = logger
        let recentApplications = RecentReads<ApplicationRecord>()
        self.recentApplications = recentApplications
        self.wakeUpRelay = PostgresWakeUpRelay(client: client, forgetApplications: { recentApplications.clear() }, logger: logger)
    }

    /// Runs the connection pool until cancelled: queries need it running.
    public func run() async {
        await client.run()
    }

    /// Runs the pool, migrates the database, and gives the store to `body`; the pool closes when
    /// `body` returns.
    public static func withStore<T: Sendable>(
        _ configuration: PostgresClient.Configuration, logger: Logger, _ body: (PostgresStore) async throws -> T
    ) async throws -> T {
        let store = PostgresStore(configuration, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await store.run() }
            defer { group.cancelAll() }
            try await store.migrate()
            return try await body(store)
        }
    }

    public func isReachable() async -> Bool {
        // Bounded at 2 s whatever the probe does: a query already sent on a hung connection
        // cannot be called back, so the answer does not wait for it to end.
        let answered = NIOLockedValueBox<CheckedContinuation<Bool, Never>?>(nil)
        return await withCheckedContinuation { continuation in
            answered.withLockedValue { $0 = continuation }
            let finish = { @Sendable (value: Bool) in answered.withLockedValue { $0.take() }?.resume(returning: value) }
            let probe = Task { [client, logger] in
                finish((try? await client.query("SELECT 1", logger: logger).collect().first?.decode(Int.self)) == 1)
            }
            Task {
                try? await Task.sleep(for: .seconds(2))
                probe.cancel()
                finish(false)
            }
        }
    }

    /// One query outside a transaction (a single statement is atomic by itself).
    @discardableResult
    func rows(_ query: PostgresQuery) async throws -> [PostgresRow] {
        try await connection(kind: Self.kind(of: query)) { [logger] connection in try await connection.rows(query, logger: logger) }
    }

    /// A statement that only reads (SELECT, or WITH … SELECT without a data-modifying part) is timed
    /// as a read, any other as a write.
    static func kind(of query: PostgresQuery) -> TransactionTimings.Kind {
        let sql = query.sql.drop { $0.isWhitespace }.prefix(6).uppercased()
        guard sql == "SELECT" || (sql.hasPrefix("WITH") && !["INSERT", "UPDATE", "DELETE"].contains { query.sql.uppercased().contains($0) })
        else { return .write }
        return .read
    }

    private enum Lease { case waiting, leased, timedOut }


    /// A pooled connection for `body`'s statements, each its own transaction unless `body`
    /// begins one. The wait for the connection is bounded (`leaseTimeout`), and the call's use
    /// of it (`callTimeout`, past which the connection is closed).
    /// `unbounded`: no `callTimeout`, for work that may rightly take long (migrations, copying a
    /// data directory in).
    func connection<T: Sendable>(
        kind: TransactionTimings.Kind = .read, unbounded: Bool = false, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await transactionTimings.measure(kind) { try await leased(callTimeout: unbounded ? nil : callTimeout, body) }
    }

    private func leased<T: Sendable>(
        callTimeout: Duration?, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        // waiting → leased (the body runs) or waiting → timedOut (it never does): one wins.
        let lease = NIOLockedValueBox(Lease.waiting)
        let timeout = leaseTimeout
        do {
            return try await withThrowingTaskGroup(of: T?.self) { group in
                group.addTask { [client] in
                    try await client.withConnection { connection in
                        let won = lease.withLockedValue { state in
                            guard state == .waiting else { return false }
                            state = .leased
                            return true
                        }
                        guard won else { throw CancellationError() }
                        // A statement sent on a connection the server was closing in a restart
                        // can go unanswered for ever (seen with `pg_ctl restart -m fast` under
                        // load): the request would hang, and the node could not shut down. Past
                        // `callTimeout` the connection is closed, which fails what waits on it
                        // (503), and the pool opens a new one.
                        let watchdog = Task { [logger = self.logger] in
                            guard let callTimeout else { return }
                            try await Task.sleep(for: callTimeout)
                            logger.warning("A database call outlived its time; closing its connection", metadata: ["limit": "\(callTimeout)"])
                            try? await connection.close()
                        }
                        defer { watchdog.cancel() }
                        return try await body(connection)
                    }
                }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    let timedOut = lease.withLockedValue { state in
                        guard state == .waiting else { return false }
                        state = .timedOut
                        return true
                    }
                    if !timedOut { return nil }
                    throw StoreUnavailableError("no database connection within \(timeout)")
                }
                while let result = try await group.next() {
                    if let result {
                        group.cancelAll()
                        return result
                    }
                }
                throw CancellationError()
            }
        } catch let error as PSQLError {
            throw Self.translate(error)
        }
    }

    /// One transaction: all of `body` commits, or none of it. Retried from the start, up to four
    /// times, when PostgreSQL aborts it for a deadlock or a serialization failure, so `body` must
    /// have no effect outside the database.
    func transaction<T: Sendable>(unbounded: Bool = false, _ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await connection(kind: .write, unbounded: unbounded) { [logger] connection in
                    try await connection.query("BEGIN ISOLATION LEVEL READ COMMITTED", logger: logger)
                    do {
                        let result = try await body(connection)
                        try await connection.query("COMMIT", logger: logger)
                        return result
                    } catch {
                        _ = try? await connection.query("ROLLBACK", logger: logger)
                        throw error
                    }
                }
            } catch let error as PSQLError where attempt < 5 && Self.isRetryable(error) {
                attempt += 1
            } catch let error as PSQLError {
                throw Self.translate(error)
            }
        }
    }

    /// The database being out of reach becomes `StoreUnavailableError` (503); anything else stays
    /// what it is, a bug to log.
    private static func translate(_ error: PSQLError) -> any Error {
        switch error.code {
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed,
             .sslUnsupported, .failedToAddSSLHandler:
            return StoreUnavailableError("\(error.code)")
        default:
            let state = error.serverInfo?[.sqlState] ?? ""
            // Class 08: connection exceptions; class 57: the server is shutting down or starting.
            if state.hasPrefix("08") || state.hasPrefix("57") { return StoreUnavailableError("SQLSTATE \(state)") }
            // U+0000 in text or JSON, which SQLite stores and PostgreSQL cannot: the request's
            // fault, whichever field the validation before did not cover.
            if state == "22021" || state == "22P05" {
                return StoreError.unstorableValue("A value contains U+0000 (NUL), which cannot be stored.")
            }
            return error
        }
    }

    /// Deadlock detected or serialization failure: the transaction did nothing and may run again.
    private static func isRetryable(_ error: PSQLError) -> Bool {
        guard let state = error.serverInfo?[.sqlState] else { return false }
        return state == "40P01" || state == "40001"
    }
}

extension PostgresConnection {
    /// The rows of one statement of the transaction.
    func rows(_ query: PostgresQuery, logger: Logger) async throws -> [PostgresRow] {
        try await self.query(query, logger: logger).collect()
    }

    /// Runs a statement whose rows, if any, are not needed.
    func run(_ query: PostgresQuery, logger: Logger) async throws {
        _ = try await self.query(query, logger: logger).collect()
    }

    /// Holds a transaction-scoped advisory lock on `key` until the transaction ends. Keys hash to
    /// 64 bits: a collision makes two unrelated transactions wait for each other, never wrong.
    func lock(_ key: String, logger: Logger) async throws {
        try await run("SELECT pg_advisory_xact_lock(hashtextextended(\(key), 0))", logger: logger)
    }
}
