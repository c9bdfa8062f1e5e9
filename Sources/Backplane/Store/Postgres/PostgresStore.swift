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
    /// Every signed request's sign-in read and nonce, grouped (`PostgresStore+SignIn.swift`).
    let signInReads = CallGroups<DeviceKey, (DeviceRecord, [CommandRecord])?>()
    let nonceSpends = CallGroups<SignedRequestRecord, (floor: Int64?, spent: Bool)>()

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
        _ configuration: PostgresClient.Configuration, logger: Logger, leaseTimeout: Duration = .seconds(5),
        _ body: (PostgresStore) async throws -> T
    ) async throws -> T {
        let store = PostgresStore(configuration, logger: logger, leaseTimeout: leaseTimeout)
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
        let answer = FirstAnswer<Bool>()
        let probe = Task { [client, logger] in
            answer.give(.success((try? await client.query("SELECT 1", logger: logger).collect().first?.decode(Int.self)) == 1))
        }
        let timer = Self.timers.any().scheduleTask(in: .seconds(2)) {
            answer.give(.success(false))
            probe.cancel()
        }
        defer { timer.cancel() }
        return (try? await answer.value) ?? false
    }

    /// Where the store's timers run: NIO's shared event loops, which postgres-nio uses too.
    static let timers: any EventLoopGroup = PostgresClient.defaultEventLoopGroup

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
        // The caller is answered by whichever comes first: the body's end, the wait for a
        // connection timing out, or the call timing out (`FirstAnswer`). It does not wait for the
        // task running the body, which a statement postgres-nio never answers can hold for ever.
        let answer = FirstAnswer<T>()
        // waiting → leased (the body runs) or waiting → timedOut (it never does): one wins.
        let lease = NIOLockedValueBox(Lease.waiting)
        let work = Task { [client, logger] in
            do {
                let result = try await client.withConnection { connection in
                    let won = lease.withLockedValue { state in
                        guard state == .waiting else { return false }
                        state = .leased
                        return true
                    }
                    guard won else { throw CancellationError() }
                    // Past `callTimeout` the call is answered 503 and its connection closed,
                    // which fails what else waits on it; the pool opens a new one.
                    let deadline = callTimeout.map { limit in
                        connection.eventLoop.scheduleTask(in: TimeAmount(limit)) {
                            guard answer.give(.failure(StoreUnavailableError("a database call unanswered within \(limit)"))) else { return }
                            logger.warning("A database call outlived its time; closing its connection", metadata: ["limit": "\(limit)"])
                            connection.close().whenComplete { _ in }
                        }
                    }
                    defer { deadline?.cancel() }
                    return try await body(connection)
                }
                answer.give(.success(result))
            } catch {
                answer.give(.failure(error))
            }
        }
        let timeout = leaseTimeout
        let leaseTimer = Self.timers.any().scheduleTask(in: TimeAmount(timeout)) {
            let timedOut = lease.withLockedValue { state in
                guard state == .waiting else { return false }
                state = .timedOut
                return true
            }
            guard timedOut else { return }
            answer.give(.failure(StoreUnavailableError("no database connection within \(timeout)")))
            work.cancel()
        }
        defer { leaseTimer.cancel() }
        do {
            return try await withTaskCancellationHandler { try await answer.value } onCancel: { work.cancel() }
        } catch let error as PSQLError {
            throw Self.translate(error)
        }
    }

    /// One transaction: all of `body` commits, or none of it. Retried from the start, up to four
    /// times, when PostgreSQL aborts it for a deadlock or a serialization failure, so `body` must
    /// have no effect outside the database.
    func transaction<T: Sendable>(unbounded: Bool = false, _ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        try await Self.retryingConflicts {
            try await connection(kind: .write, unbounded: unbounded) { [logger] connection in
                try await connection.run("BEGIN ISOLATION LEVEL READ COMMITTED", logger: logger)
                do {
                    let result = try await body(connection)
                    try await connection.run("COMMIT", logger: logger)
                    return result
                } catch {
                    // Not on a closed connection: the ROLLBACK would never be answered
                    // (`FirstAnswer`), and the server rolls back what a lost connection began.
                    if !connection.isClosed { _ = try? await connection.run("ROLLBACK", logger: logger) }
                    throw error
                }
            }
        }
    }

    /// `call`, run again from the start, up to five attempts in all, when PostgreSQL aborted it
    /// for a deadlock or a serialization failure; any other database error translated.
    static func retryingConflicts<T>(_ call: () async throws -> T) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await call()
            } catch let error as PSQLError where attempt < 5 && isRetryable(error) {
                attempt += 1
            } catch let error as PSQLError {
                throw translate(error)
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
        try await statement(query, logger: logger).collect()
    }

    /// Runs a statement whose rows, if any, are not needed.
    func run(_ query: PostgresQuery, logger: Logger) async throws {
        _ = try await statement(query, logger: logger).collect()
    }

    /// Sends one statement, unless the connection has closed: postgres-nio never answers a
    /// statement written to a closed connection (`FirstAnswer`), so the call would wait for its
    /// time limit instead of failing at once.
    private func statement(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence {
        guard !isClosed else { throw StoreUnavailableError("the database connection closed") }
        return try await self.query(query, logger: logger)
    }

    /// Holds a transaction-scoped advisory lock on `key` until the transaction ends. Keys hash to
    /// 64 bits: a collision makes two unrelated transactions wait for each other, never wrong.
    func lock(_ key: String, logger: Logger) async throws {
        _ = try await prepared(PreparedStatements.AdvisoryLock(key: key), logger: logger)
    }
}
