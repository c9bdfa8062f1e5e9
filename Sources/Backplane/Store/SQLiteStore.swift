import Foundation
import GRDB
import Shared

/// The embedded default store: one SQLite file in WAL mode through a GRDB `DatabasePool`.
///
/// Durability: `PRAGMA synchronous = FULL`. In WAL mode NORMAL already survives a process crash,
/// but a power loss or kernel panic can roll back the last commits; FULL syncs the WAL on every
/// commit, so anything the backplane acknowledged (a registration, an enqueued command) survives
/// the machine going down too. The cost is one fsync per write transaction, which the services
/// keep to one per request.
public final class SQLiteStore: BackplaneStore {
    public let writer: any DatabaseWriter

    /// Opens (creating if needed) `backplane.sqlite` in `directory` and migrates it.
    public convenience init(directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try self.init(path: directory.appendingPathComponent("backplane.sqlite").path)
    }

    public init(path: String) throws {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        // The admin commands may write while `serve` runs: wait for the lock rather than fail.
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        let pool = try DatabasePool(path: path, configuration: configuration)
        try Self.migrator.migrate(pool)
        self.writer = pool
    }

    /// Shipped migrations never change; a new schema step is a new migration.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: applications, keys, tokens, nonces, devices") { db in
            try db.create(table: "applications") { t in
                t.primaryKey("id", .text)
                t.column("name", .text).notNull()
                t.column("settings", .text).notNull()
                t.column("created_at", .datetime).notNull()
            }
            try db.create(table: "app_keys") { t in
                t.primaryKey("key_id", .text)
                t.column("application_id", .text).notNull().references("applications", onDelete: .cascade)
                t.column("secret", .text).notNull()
                t.column("created_at", .datetime).notNull()
                t.column("revoked_at", .datetime)
            }
            try db.create(table: "tokens") { t in
                t.primaryKey("id", .text)
                t.column("application_id", .text).notNull().references("applications", onDelete: .cascade)
                t.column("scope", .text).notNull()
                t.column("token_hash", .text).notNull().unique()
                t.column("name", .text).notNull()
                t.column("created_at", .datetime).notNull()
                t.column("revoked_at", .datetime)
            }
            try db.create(table: "nonces", options: .withoutRowID) { t in
                t.column("key_id", .text).notNull()
                t.column("nonce", .text).notNull()
                t.column("expires_at", .datetime).notNull().indexed()
                t.primaryKey(["key_id", "nonce"])
            }
            try db.create(table: "devices") { t in
                t.autoIncrementedPrimaryKey("row_id")
                t.column("application_id", .text).notNull().references("applications", onDelete: .cascade)
                t.column("device_id", .text).notNull()
                t.column("user_id", .text).notNull()
                t.column("external_device_id", .text)
                t.column("nickname", .text)
                t.column("platform", .text).notNull()
                t.column("model", .text)
                t.column("os_version", .text)
                t.column("sdk_version", .text)
                t.column("app_version", .text)
                t.column("push_token", .text)
                t.column("download_enabled", .boolean).notNull()
                t.column("credential_hash", .text).notNull()
                t.column("registered_at", .datetime).notNull()
                t.column("updated_at", .datetime).notNull()
                t.column("last_seen_at", .datetime).notNull()
                t.column("unregistered_at", .datetime)
                t.uniqueKey(["application_id", "device_id"])
            }
            try db.create(index: "devices_by_user", on: "devices", columns: ["application_id", "user_id"])
            try db.create(index: "devices_by_external_id", on: "devices", columns: ["application_id", "external_device_id"])
        }
        migrator.registerMigration("v2: commands") { db in
            try db.create(table: "commands") { t in
                t.autoIncrementedPrimaryKey("row_id")
                t.column("command_id", .text).notNull().unique()
                t.column("application_id", .text).notNull().references("applications", onDelete: .cascade)
                t.column("device_id", .text).notNull()
                t.column("type", .text).notNull()
                t.column("asset_ids", .text)
                t.column("state", .text).notNull()
                t.column("created_at", .datetime).notNull()
                t.column("updated_at", .datetime).notNull()
                t.column("expires_at", .datetime)
                t.column("delivered_at", .datetime)
                t.column("completed_at", .datetime)
                t.column("failure_reason", .text)
                t.column("deferrals", .integer).notNull()
            }
            try db.create(index: "commands_by_device", on: "commands", columns: ["application_id", "device_id", "state"])
        }
        return migrator
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

    public func recordSignedRequest(
        keyId: String, nonce: String, expiresAt: Date, deviceId: String?, applicationId: String, now: Date
    ) async throws -> Bool {
        try await writer.write { db in
            try db.execute(
                sql: "INSERT INTO nonces (key_id, nonce, expires_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                arguments: [keyId, nonce, expiresAt])
            guard db.changesCount == 1 else { return false }
            if let deviceId {
                try db.execute(
                    sql: "UPDATE devices SET last_seen_at = ? WHERE application_id = ? AND device_id = ?",
                    arguments: [now, applicationId, deviceId])
            }
            return true
        }
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

public enum StoreError: Error, CustomStringConvertible {
    case unknownApplication(String)

    public var description: String {
        switch self {
        case .unknownApplication(let id): "No application with id \(id)."
        }
    }
}

// GRDB conformances live with the SQLite store, so the records stay plain for other stores.

public protocol SnakeCaseRecord: FetchableRecord, MutablePersistableRecord {}
extension SnakeCaseRecord {
    public static var databaseColumnDecodingStrategy: DatabaseColumnDecodingStrategy { .convertFromSnakeCase }
    public static var databaseColumnEncodingStrategy: DatabaseColumnEncodingStrategy { .convertToSnakeCase }
}

extension ApplicationRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "applications" }
}

extension AppKeyRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "app_keys" }
}

extension TokenRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "tokens" }
}

extension DeviceRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "devices" }

    public mutating func didInsert(_ inserted: InsertionSuccess) {
        rowId = inserted.rowID
    }
}

extension CommandRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "commands" }

    public mutating func didInsert(_ inserted: InsertionSuccess) {
        rowId = inserted.rowID
    }
}

extension TokenScope: DatabaseValueConvertible {}
extension CommandType: DatabaseValueConvertible {}
extension CommandState: DatabaseValueConvertible {}
