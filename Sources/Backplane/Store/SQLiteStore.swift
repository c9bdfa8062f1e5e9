import Foundation
import GRDB
import Shared

/// The embedded default store: one SQLite file in WAL mode through a GRDB `DatabasePool`.
///
/// Durability: `PRAGMA synchronous = FULL`. In WAL mode NORMAL already survives a process crash,
/// but a power loss or kernel panic can roll back the last commits; FULL syncs the WAL on every
/// commit, so anything the backplane acknowledged (a registration, an enqueued command) survives
/// the machine going down too. The cost is one fsync per write transaction. Most requests make
/// one; a sync makes up to three (its nonce, the command deliveries and the device's last-seen
/// update), and an event upload records its nonce inside its own transaction to make one.
public final class SQLiteStore: BackplaneStore {
    public let writer: any DatabaseWriter

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
        try self.init(writer: DatabasePool(path: path, configuration: Self.configuration))
    }

    /// A migrated database in memory, gone when the store is: for tests, and for trying the
    /// server without a data directory. One connection, so reads wait for writes.
    public static func inMemory() throws -> SQLiteStore {
        try SQLiteStore(writer: DatabaseQueue(configuration: configuration))
    }

    private init(writer: any DatabaseWriter) throws {
        try Self.migrator.migrate(writer)
        self.writer = writer
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
            files.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        for file in [path, path + "-wal", path + "-shm"] where files.fileExists(atPath: file) {
            try files.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        }
    }

    public func isReachable() async -> Bool {
        (try? await writer.read { db in try Int.fetchOne(db, sql: "SELECT 1") }) == 1
    }

    // MARK: applications, keys, tokens

    public func createApplication(_ application: ApplicationRecord, key: AppKeyRecord) async throws {
        try await writer.write { db in
            var application = application, key = key
            try application.insert(db)
            try key.insert(db)
        }
    }

    public func application(id: String) async throws -> ApplicationRecord? {
        try await writer.read { db in try ApplicationRecord.fetchOne(db, key: id) }
    }

    public func applications() async throws -> [ApplicationRecord] {
        try await writer.read { db in try ApplicationRecord.order(Column("created_at")).fetchAll(db) }
    }

    public func updateSettings(
        applicationId: String, _ change: @Sendable (ApplicationSettings) throws -> ApplicationSettings
    ) async throws -> ApplicationSettings? {
        try await writer.write { db in
            guard var application = try ApplicationRecord.fetchOne(db, key: applicationId) else { return nil }
            application.settings = try change(application.settings)
            try application.update(db)
            return application.settings
        }
    }

    public func addAppKey(_ key: AppKeyRecord) async throws {
        try await writer.write { db in
            var key = key
            try key.insert(db)
        }
    }

    public func appKey(id: String) async throws -> AppKeyRecord? {
        try await writer.read { db in try AppKeyRecord.fetchOne(db, key: id) }
    }

    public func appKeys(applicationId: String) async throws -> [AppKeyRecord] {
        try await writer.read { db in
            try AppKeyRecord.filter(Column("application_id") == applicationId).order(Column("created_at")).fetchAll(db)
        }
    }

    public func revokeAppKey(
        applicationId: String, keyId: String, at date: Date, check: @Sendable ([AppKeyRecord]) throws -> Void
    ) async throws -> AppKeyRecord? {
        try await writer.write { db in
            guard var key = try AppKeyRecord.fetchOne(db, key: keyId), key.applicationId == applicationId else { return nil }
            if key.revokedAt != nil { return key }
            let active = try AppKeyRecord
                .filter(Column("application_id") == applicationId && Column("revoked_at") == nil)
                .fetchAll(db)
            try check(active)
            key.revokedAt = date
            try key.update(db)
            return key
        }
    }

    public func createToken(_ token: TokenRecord) async throws {
        try await writer.write { db in
            var token = token
            try token.insert(db)
        }
    }

    public func token(hash: String) async throws -> TokenRecord? {
        try await writer.read { db in try TokenRecord.filter(Column("token_hash") == hash).fetchOne(db) }
    }

    // MARK: signed requests

    public func recordSignedRequest(_ request: SignedRequestRecord) async throws -> Bool {
        try await writer.write { db in try Self.record(db, request) }
    }

    /// Records a signed request's nonce inside `db`'s transaction; false for a replay.
    static func record(_ db: Database, _ request: SignedRequestRecord) throws -> Bool {
        try db.execute(
            sql: "INSERT INTO nonces (key_id, nonce, expires_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            arguments: [request.keyId, request.nonce, request.expiresAt])
        guard db.changesCount == 1 else { return false }
        if let deviceId = request.deviceId {
            try db.execute(
                sql: "UPDATE devices SET last_seen_at = ? WHERE application_id = ? AND device_id = ?",
                arguments: [request.now, request.applicationId, deviceId])
        }
        return true
    }

    public func pruneNonces(expiredBefore date: Date) async throws -> Int {
        try await writer.write { db in
            try db.execute(sql: "DELETE FROM nonces WHERE expires_at < ?", arguments: [date])
            return db.changesCount
        }
    }

    // MARK: devices

    public func device(applicationId: String, deviceId: String) async throws -> DeviceRecord? {
        try await writer.read { db in try Self.device(db, applicationId: applicationId, deviceId: deviceId) }
    }

    public func devices(applicationId: String, userId: String) async throws -> [DeviceRecord] {
        try await writer.read { db in
            try DeviceRecord
                .filter(Column("application_id") == applicationId && Column("user_id") == userId && Column("unregistered_at") == nil)
                .order(Column("row_id"))
                .fetchAll(db)
        }
    }

    public func devices(applicationId: String, filter: DeviceFilter, afterRowId: Int64?, limit: Int) async throws -> [DeviceRecord] {
        try await writer.read { db in
            var request = DeviceRecord.filter(Column("application_id") == applicationId)
            if let userId = filter.userId { request = request.filter(Column("user_id") == userId) }
            if let external = filter.externalDeviceId { request = request.filter(Column("external_device_id") == external) }
            if !filter.includeUnregistered { request = request.filter(Column("unregistered_at") == nil) }
            if let afterRowId { request = request.filter(Column("row_id") > afterRowId) }
            return try request.order(Column("row_id")).limit(limit).fetchAll(db)
        }
    }

    public func registerDevice<Decision: Sendable>(
        applicationId: String, deviceId: String, userId: String,
        decide: @Sendable (RegistrationState) throws -> (DeviceRecord, Decision)
    ) async throws -> (DeviceRecord, Decision) {
        try await writer.write { db in
            let existing = try Self.device(db, applicationId: applicationId, deviceId: deviceId)
            let limit = try Self.limitState(db, applicationId: applicationId, userId: userId, excluding: deviceId)
            var (device, decision) = try decide(RegistrationState(existing: existing, limit: limit))
            device.rowId = existing?.rowId
            try device.save(db)
            return (device, decision)
        }
    }

    public func updateDevice(
        applicationId: String, deviceId: String,
        _ change: @Sendable (DeviceRecord, DeviceLimitState) throws -> DeviceRecord
    ) async throws -> DeviceRecord? {
        try await writer.write { db in
            guard let existing = try Self.device(db, applicationId: applicationId, deviceId: deviceId) else { return nil }
            let limit = try Self.limitState(db, applicationId: applicationId, userId: existing.userId, excluding: deviceId)
            var device = try change(existing, limit)
            device.rowId = existing.rowId
            if device != existing { try device.update(db) }
            return device
        }
    }

    // MARK: commands

    public func insertCommands(_ commands: [CommandRecord]) async throws -> [CommandRecord] {
        try await writer.write { db in
            try commands.map { command in
                var command = command
                try command.insert(db)
                return command
            }
        }
    }

    public func command(applicationId: String, commandId: String) async throws -> CommandRecord? {
        try await writer.read { db in try Self.command(db, applicationId: applicationId, commandId: commandId) }
    }

    public func commands(applicationId: String, deviceId: String) async throws -> [CommandRecord] {
        try await writer.read { db in
            try CommandRecord
                .filter(Column("application_id") == applicationId && Column("device_id") == deviceId)
                .order(Column("row_id"))
                .fetchAll(db)
        }
    }

    public func updateCommand(
        applicationId: String, commandId: String, _ change: @Sendable (CommandRecord) throws -> CommandRecord
    ) async throws -> CommandRecord? {
        try await writer.write { db in
            guard let existing = try Self.command(db, applicationId: applicationId, commandId: commandId) else { return nil }
            let updated = try change(existing)
            if updated != existing { try updated.update(db) }
            return updated
        }
    }

    public func syncCommands(
        applicationId: String, deviceId: String, acks: [CommandAck], rules: CommandSyncRules
    ) async throws -> (results: [CommandAckResult], open: [CommandRecord]) {
        try await writer.write { db in
            var results: [CommandAckResult] = []
            for ack in acks {
                let existing = try Self.command(db, applicationId: applicationId, commandId: ack.commandId)
                let decision = rules.applyAck(ack, existing)
                if let updated = decision.updated, updated != existing { try updated.update(db) }
                if decision.detachesDevice, let device = try Self.device(db, applicationId: applicationId, deviceId: deviceId) {
                    let detached = rules.detach(device)
                    if detached != device { try detached.update(db) }
                }
                results.append(decision.result)
            }
            let open = try CommandRecord
                .filter(Column("application_id") == applicationId && Column("device_id") == deviceId)
                .filter([CommandState.pending.rawValue, CommandState.delivered.rawValue].contains(Column("state")))
                .order(Column("row_id"))
                .fetchAll(db)
            var stillOpen: [CommandRecord] = []
            for command in open {
                let delivered = rules.deliver(command)
                if delivered != command { try delivered.update(db) }
                if !delivered.state.isFinished { stillOpen.append(delivered) }
            }
            return (results, stillOpen)
        }
    }

    private static func command(_ db: Database, applicationId: String, commandId: String) throws -> CommandRecord? {
        try CommandRecord.filter(Column("application_id") == applicationId && Column("command_id") == commandId).fetchOne(db)
    }

    private static func device(_ db: Database, applicationId: String, deviceId: String) throws -> DeviceRecord? {
        try DeviceRecord.filter(Column("application_id") == applicationId && Column("device_id") == deviceId).fetchOne(db)
    }

    private static func limitState(_ db: Database, applicationId: String, userId: String, excluding deviceId: String) throws -> DeviceLimitState {
        guard let application = try ApplicationRecord.fetchOne(db, key: applicationId) else {
            throw StoreError.unknownApplication(applicationId)
        }
        let enabled = try Int.fetchOne(db, sql: """
            SELECT COUNT(*) FROM devices
            WHERE application_id = ? AND user_id = ? AND download_enabled AND unregistered_at IS NULL AND device_id <> ?
            """, arguments: [applicationId, userId, deviceId]) ?? 0
        return DeviceLimitState(settings: application.settings, otherEnabledDevices: enabled)
    }
}
