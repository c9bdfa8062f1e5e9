import Foundation
import GRDB
import BackplaneWire

/// The embedded default store: one SQLite file in WAL mode through a GRDB `DatabasePool`.
///
/// Durability: `PRAGMA synchronous = FULL`. In WAL mode NORMAL already survives a process crash,
/// but a power loss or kernel panic can roll back the last commits; FULL syncs the WAL on every
/// commit, so anything the backplane acknowledged (a registration, an enqueued command) survives
/// the machine going down too. The cost is one fsync per commit, which concurrent requests
/// share (`GroupCommit`). A quiet sync writes nothing: its nonce is spent in memory under a
/// durable lease (`SpentNonces`), and last-seen times are written in batches (`LastSeenLog`).
public final class SQLiteStore: BackplaneStore {
    /// Private: every query goes through `read` and `write` below, the one place where the
    /// store's transactions begin.
    private let writer: any DatabaseWriter
    /// Every write transaction goes through it: concurrent requests share commits.
    private let groupCommit: GroupCommit
    /// Connections for `pointRead`; none for a database in memory, which has one connection.
    private let pointReaders: PointReaders?
    /// Signed requests' nonces, spent in memory under a durable lease (SQLiteStore+Nonces).
    let spentNonces: SpentNonces
    /// Applications and app keys as recently read (`RecentReads`); cleared by this store's changes to them.
    let recentApplications = RecentReads<ApplicationRecord>()
    let recentAppKeys = RecentReads<AppKeyRecord>()
    public let transactionTimings = TransactionTimings()

    /// Opens (creating if needed) `backplane.sqlite` in `directory` and migrates it. The directory
    /// is made owner-only (0700) whatever the umask: the database holds app key secrets.
    public convenience init(directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory.path)
        try self.init(path: directory.appendingPathComponent("backplane.sqlite").path)
    }

    /// Opens (creating if needed) the database at `path` and migrates it. The database file, and
    /// so the WAL and shared-memory files SQLite creates with the database file's mode, are
    /// owner-only (0600), and so are files an older server left readable by others.
    public convenience init(path: String) throws {
        try Self.restrictToOwner(path)
        try self.init(writer: DatabasePool(path: path, configuration: Self.configuration), path: path, configuration: Self.configuration)
    }

    /// For tests: `observe` sees every statement the store runs, its values inlined, so a test
    /// can ask SQLite how it plans the store's own queries.
    convenience init(path: String, observe: @escaping @Sendable (String) -> Void) throws {
        var configuration = Self.configuration
        configuration.prepareDatabase { db in
            db.trace(options: .statement) { event in observe(event.expandedDescription) }
        }
        try self.init(writer: DatabasePool(path: path, configuration: configuration), path: path, configuration: configuration)
    }

    /// A migrated database in memory, gone when the store is: for tests, and for trying the
    /// server without a data directory. One connection, so reads wait for writes.
    public static func inMemory() throws -> SQLiteStore {
        try SQLiteStore(writer: DatabaseQueue(configuration: configuration))
    }

    private init(writer: any DatabaseWriter, path: String? = nil, configuration: Configuration = configuration) throws {
        try Self.migrator.migrate(writer)
        self.writer = writer
        self.groupCommit = GroupCommit(writer)
        self.spentNonces = try Self.storedNonces(writer)
        self.pointReaders = try path.map { try PointReaders(path: $0, configuration: configuration) }
    }

    private static var configuration: Configuration {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        // The admin commands may write while `serve` runs: wait for the lock rather than fail.
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        return configuration
    }

    /// Creates the database file owner-only when it is missing, and sets 0600 on it and on its
    /// WAL and shared-memory files when they exist.
    private static func restrictToOwner(_ path: String) throws {
        let files = FileManager.default
        if !files.fileExists(atPath: path) {
            _ = files.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        for file in [path, path + "-wal", path + "-shm"] where files.fileExists(atPath: file) {
            try files.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        }
    }

    public func isReachable() async -> Bool {
        (try? await read { db in try Int.fetchOne(db, sql: "SELECT 1") }) == 1
    }

    /// One row through a statement prepared once per connection, for the reads every request
    /// makes (its app key and application; its device goes through `ColumnCursor`): GRDB's query
    /// interface generates, parses and authorizes its SQL on each call, work that a prepared
    /// statement does once per connection instead of once per request.
    static func fetchOne<Record: FetchableRecord>(
        _ type: Record.Type, _ db: Database, sql: String, _ arguments: StatementArguments
    ) throws -> Record? {
        try Record.fetchOne(db.cachedStatement(sql: sql), arguments: arguments)
    }

    /// A read transaction: one snapshot for everything `body` reads.
    func read<T: Sendable>(_ body: @Sendable (Database) throws -> T) async throws -> T {
        try await transactionTimings.measure(.read) { try await writer.read(body) }
    }

    /// The point reads every request makes (its app key, application, device and the device's
    /// open commands): on the calling thread when one of `pointReaders`' connections is free,
    /// which saves the two thread hand-offs of `read`; through `read` when none is, or when
    /// SQLite answers busy. Only for look-ups by key: anything that scans or pages goes through
    /// `read`. On the calling thread there is no transaction around `body` (its BEGIN and COMMIT
    /// would be two more statements on every request): each statement reads the latest commit, so
    /// `body` must not need two statements to see the same one.
    func pointRead<T: Sendable>(_ body: @Sendable (Database) throws -> T) async throws -> T {
        guard let pointReaders, let connection = pointReaders.take() else { return try await read(body) }
        do {
            defer { pointReaders.giveBack(connection) }
            return try transactionTimings.measure(.read) { try connection.inDatabase(body) }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY {
            return try await read(body)
        }
    }

    /// A write: all of `body` commits, or none of it, and the caller hears back after the commit.
    /// `body` runs while no other write can, in a savepoint of a transaction it may share with
    /// other requests' writes (`GroupCommit`): it must not wait on anything but the database, must
    /// do bounded work, and must leave the transaction alone (no COMMIT or ROLLBACK of its own).
    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await transactionTimings.measure(.write) { try await groupCommit.write(body) }
    }
}
