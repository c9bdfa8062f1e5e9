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

    /// Opens (creating if needed) `backplane.sqlite` in `directory` and migrates it. The directory
    /// is made owner-only (0700) whatever the umask: the database holds app key secrets.
    public convenience init(directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory.path)
        try self.init(path: directory.appendingPathComponent("backplane.sqlite").path)
    }

    /// Opens (creating if needed) the database at `path` and migrates it. The database file, and
    /// so the WAL and shared-memory files SQLite creates with the database file's mode, are
    /// owner-only (0600).
    public init(path: String) throws {
        try Self.restrictToOwner(path)
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        // The admin commands may write while `serve` runs: wait for the lock rather than fail.
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        let pool = try DatabasePool(path: path, configuration: configuration)
        try Self.migrator.migrate(pool)
        // Files an older server left readable by others.
        try Self.restrictToOwner(path)
        self.writer = pool
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
        migrator.registerMigration("v3: feeds, episodes, change log, subscriptions") { db in
            try db.create(table: "feeds") { t in
                t.column("application_id", .text).notNull().references("applications", onDelete: .cascade)
                t.column("feed_id", .text).notNull()
                t.column("title", .text).notNull()
                t.column("metadata", .text)
                t.column("created_at", .datetime).notNull()
                t.column("updated_at", .datetime).notNull()
                t.column("deleted_at", .datetime)
                t.primaryKey(["application_id", "feed_id"])
            }
            try db.create(table: "episodes") { t in
                t.column("application_id", .text).notNull()
                t.column("feed_id", .text).notNull()
                t.column("asset_id", .text).notNull()
                t.column("episode", .text).notNull()
                t.column("announced_at", .datetime).notNull()
                t.column("updated_at", .datetime).notNull()
                t.column("retracted_at", .datetime)
                t.primaryKey(["application_id", "feed_id", "asset_id"])
                t.foreignKey(["application_id", "feed_id"], references: "feeds", onDelete: .cascade)
            }
            try db.create(index: "episodes_by_update", on: "episodes", columns: ["application_id", "updated_at", "feed_id", "asset_id"])
            try db.create(index: "episodes_by_announcement", on: "episodes", columns: ["application_id", "feed_id", "announced_at"])
            // The change log: one row per episode write. SQLite commits one writer at a time, so
            // sequence numbers become visible in order; a reader never sees N+1 without N.
            try db.create(table: "episode_changes") { t in
                t.autoIncrementedPrimaryKey("seq")
                t.column("application_id", .text).notNull()
                t.column("feed_id", .text).notNull()
                t.column("asset_id", .text).notNull()
                t.column("kind", .text).notNull()
                t.column("snapshot", .text)
            }
            try db.create(index: "episode_changes_by_feed", on: "episode_changes", columns: ["application_id", "feed_id", "seq"])
            try db.create(table: "subscriptions") { t in
                t.column("application_id", .text).notNull()
                t.column("device_id", .text).notNull()
                t.column("feed_id", .text).notNull()
                t.column("max_items", .integer)
                t.column("autodelete_old_items", .boolean)
                t.column("since_seq", .integer).notNull()
                t.column("subscribed_at", .datetime).notNull()
                t.column("updated_at", .datetime).notNull()
                t.primaryKey(["application_id", "device_id", "feed_id"])
            }
            try db.create(index: "subscriptions_by_feed", on: "subscriptions", columns: ["application_id", "feed_id"])
        }
        migrator.registerMigration("v4: event log") { db in
            // Times are integer milliseconds since 1970 (UTC): compact, exact, cheap to compare.
            try db.execute(sql: EventsSchema.sql)
        }
        migrator.registerMigration("v5: device keys") { db in
            try db.alter(table: "devices") { t in t.add(column: "public_key", .text) }
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

    public func recordSignedRequest(_ request: SignedRequestRecord) async throws -> Bool {
        try await writer.write { db in try Self.record(db, request) }
    }

    private static func record(_ db: Database, _ request: SignedRequestRecord) throws -> Bool {
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

    // MARK: feeds, episodes, subscriptions

    public func upsertFeed(_ feed: FeedRecord) async throws -> (FeedRecord, created: Bool) {
        try await writer.write { db in
            var feed = feed
            if let existing = try Self.feed(db, applicationId: feed.applicationId, feedId: feed.feedId) {
                feed.createdAt = existing.createdAt
                try feed.update(db)
                return (feed, existing.deletedAt != nil)
            }
            try feed.insert(db)
            return (feed, true)
        }
    }

    public func feed(applicationId: String, feedId: String) async throws -> FeedRecord? {
        try await writer.read { db in try Self.feed(db, applicationId: applicationId, feedId: feedId) }
    }

    public func feeds(applicationId: String) async throws -> [FeedRecord] {
        try await writer.read { db in
            try FeedRecord.filter(Column("application_id") == applicationId && Column("deleted_at") == nil).order(Column("feed_id")).fetchAll(db)
        }
    }

    public func deleteFeed(applicationId: String, feedId: String, at date: Date) async throws -> Bool {
        try await writer.write { db in
            guard var feed = try Self.feed(db, applicationId: applicationId, feedId: feedId), feed.deletedAt == nil else { return false }
            feed.deletedAt = date
            feed.updatedAt = date
            try feed.update(db)
            let live = try EpisodeRecord
                .filter(Column("application_id") == applicationId && Column("feed_id") == feedId && Column("retracted_at") == nil)
                .fetchAll(db)
            for var episode in live {
                episode.retractedAt = date
                episode.updatedAt = date
                try episode.update(db)
                try Self.appendChange(db, EpisodeWrite(record: episode, kind: .retracted))
            }
            return true
        }
    }

    public func writeEpisodes(
        applicationId: String, feedId: String, assetIds: [String],
        _ plan: @Sendable ([String: EpisodeRecord]) throws -> [EpisodeWrite]
    ) async throws -> [EpisodeWrite] {
        try await writer.write { db in
            let existing = try EpisodeRecord
                .filter(Column("application_id") == applicationId && Column("feed_id") == feedId && assetIds.contains(Column("asset_id")))
                .fetchAll(db)
            let writes = try plan(Dictionary(existing.map { ($0.assetId, $0) }, uniquingKeysWith: { first, _ in first }))
            for var write in writes {
                try write.record.save(db)
                try Self.appendChange(db, write)
            }
            return writes
        }
    }

    public func episode(applicationId: String, feedId: String, assetId: String) async throws -> EpisodeRecord? {
        try await writer.read { db in
            try EpisodeRecord.fetchOne(db, key: ["application_id": applicationId, "feed_id": feedId, "asset_id": assetId])
        }
    }

    public func episodes(applicationId: String, feedId: String, limit: Int?) async throws -> [EpisodeRecord] {
        try await writer.read { db in try Self.liveEpisodes(db, applicationId: applicationId, feedId: feedId, limit: limit) }
    }

    public func episodes(
        applicationId: String, updatedSince since: Date, feedIds: [String]?, after: EpisodeKey?, limit: Int
    ) async throws -> [EpisodeRecord] {
        try await writer.read { db in
            var request = EpisodeRecord.filter(
                Column("application_id") == applicationId && Column("retracted_at") == nil && Column("updated_at") >= since)
            if let feedIds { request = request.filter(feedIds.contains(Column("feed_id"))) }
            if let after {
                request = request.filter(sql: "(updated_at, feed_id, asset_id) > (?, ?, ?)", arguments: [after.updatedAt, after.feedId, after.assetId])
            }
            return try request.order(Column("updated_at"), Column("feed_id"), Column("asset_id")).limit(limit).fetchAll(db)
        }
    }

    public func subscribe(
        _ subscription: SubscriptionRecord, initialLimit: Int?
    ) async throws -> (SubscriptionRecord, created: Bool, episodes: [EpisodeRecord]) {
        try await writer.write { db in
            var subscription = subscription
            let existing = try SubscriptionRecord.fetchOne(db, key: [
                "application_id": subscription.applicationId, "device_id": subscription.deviceId, "feed_id": subscription.feedId,
            ])
            if let existing {
                subscription.sinceSeq = existing.sinceSeq
                subscription.subscribedAt = existing.subscribedAt
                try subscription.update(db)
            } else {
                subscription.sinceSeq = try Self.latestSeq(db)
                try subscription.insert(db)
            }
            let episodes = try Self.liveEpisodes(db, applicationId: subscription.applicationId, feedId: subscription.feedId, limit: initialLimit)
            return (subscription, existing == nil, episodes)
        }
    }

    public func unsubscribe(applicationId: String, deviceId: String, feedId: String) async throws -> Bool {
        try await writer.write { db in
            try SubscriptionRecord.deleteOne(db, key: ["application_id": applicationId, "device_id": deviceId, "feed_id": feedId])
        }
    }

    public func subscriptions(applicationId: String, deviceId: String) async throws -> [SubscriptionRecord] {
        try await writer.read { db in
            try SubscriptionRecord.filter(Column("application_id") == applicationId && Column("device_id") == deviceId)
                .order(Column("feed_id")).fetchAll(db)
        }
    }

    public func subscriberIds(applicationId: String, feedId: String) async throws -> [String] {
        try await writer.read { db in
            try String.fetchAll(db, sql: "SELECT device_id FROM subscriptions WHERE application_id = ? AND feed_id = ?", arguments: [applicationId, feedId])
        }
    }

    public func changes(applicationId: String, deviceId: String, afterSeq: Int64, limit: Int) async throws -> [EpisodeChangeRecord] {
        try await writer.read { db in
            // One index seek per subscribed feed, each bounded by the page size, merged by sequence
            // number: the cost follows the subscriptions and what changed in them, never the size of
            // the catalogue (a join let SQLite walk every change of the application). One read
            // transaction, so every feed is read at the same snapshot.
            let subscriptions = try SubscriptionRecord
                .filter(Column("application_id") == applicationId && Column("device_id") == deviceId)
                .fetchAll(db)
            var rows: [Row] = []
            for subscription in subscriptions {
                rows += try Row.fetchAll(db, sql: """
                    SELECT seq, feed_id, asset_id, kind, snapshot FROM episode_changes
                    WHERE application_id = ? AND feed_id = ? AND seq > ?
                    ORDER BY seq LIMIT ?
                    """, arguments: [applicationId, subscription.feedId, max(afterSeq, subscription.sinceSeq), limit])
            }
            rows.sort { ($0["seq"] as Int64) < ($1["seq"] as Int64) }
            return try rows.prefix(limit).map { row in
                let snapshot: String? = row["snapshot"]
                return EpisodeChangeRecord(
                    seq: row["seq"], feedId: row["feed_id"], assetId: row["asset_id"],
                    kind: EpisodeChange.Kind(rawValue: row["kind"]) ?? .updated,
                    snapshot: try snapshot.map { try Self.snapshotDecoder.decode(EpisodeRecord.self, from: Data($0.utf8)) })
            }
        }
    }

    public func latestChangeSeq() async throws -> Int64 {
        try await writer.read { db in try Self.latestSeq(db) }
    }

    // MARK: events

    public func insertEvents(
        applicationId: String, deviceId: String, _ events: [EventRecord], signedRequest: SignedRequestRecord?
    ) async throws -> [EventInsertOutcome] {
        try await writer.write { db in
            if let signedRequest, try !Self.record(db, signedRequest) { throw NonceReusedError() }
            let floor = try Int64.fetchOne(
                db, sql: "SELECT deleted_through FROM event_floors WHERE application_id = ? AND device_id = ?",
                arguments: [applicationId, deviceId]) ?? 0
            let insert = try db.cachedStatement(sql: EventsSchema.insert)
            return try events.map { record in
                let event = record.event, content = event.content
                if event.sequence <= floor { return .duplicate }
                try insert.execute(arguments: [
                    applicationId, deviceId, event.sequence, event.eventId, content.type.rawValue,
                    event.deviceTime.millisecondsSince1970, record.receivedAt.millisecondsSince1970, record.correctedTime.millisecondsSince1970,
                    event.userId, event.externalDeviceId, event.appState?.rawValue, event.platform, event.sdkVersion, event.appVersion,
                    content.assetId, content.deletionReason?.rawValue, content.resetType?.rawValue, content.limitType?.rawValue,
                    content.bitrate, content.durationSeconds, content.errorCode, content.errorMessage,
                    content.customName, content.customString, content.customNumber,
                ])
                if db.changesCount == 1 { return .inserted }
                let stored = try String.fetchOne(
                    db, sql: "SELECT event_id FROM events WHERE application_id = ? AND device_id = ? AND sequence = ?",
                    arguments: [applicationId, deviceId, event.sequence])
                return stored == event.eventId ? .duplicate : .sequenceReused
            }
        }
    }

    public func events(applicationId: String, filter: EventFilter, after: EventKey?, limit: Int) async throws -> [EventRecord] {
        try await writer.read { db in
            var (conditions, arguments) = Self.conditions(applicationId: applicationId, filter)
            if let after {
                conditions.append("(corrected_time, id) > (?, ?)")
                arguments += [after.correctedTime.millisecondsSince1970, after.rowId]
            }
            arguments.append(limit)
            let sql = "SELECT * FROM events WHERE \(conditions.joined(separator: " AND ")) ORDER BY corrected_time, id LIMIT ?"
            return try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments)).map(Self.eventRecord)
        }
    }

    public func eventCounts(applicationId: String, filter: EventFilter) async throws -> [EventCounts.Row] {
        try await writer.read { db in
            let (conditions, arguments) = Self.conditions(applicationId: applicationId, filter)
            let sql = """
                SELECT date(corrected_time / 1000, 'unixepoch') AS day, type, COUNT(*) AS count FROM events
                WHERE \(conditions.joined(separator: " AND ")) GROUP BY day, type ORDER BY day, type
                """
            return try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments)).compactMap { row in
                // `date()` is NULL for a time SQLite cannot place on a calendar; ingestion refuses
                // such times, but a row stored before it did must not break the report.
                guard let day: String = row["day"], let type = EventType(rawValue: row["type"]) else { return nil }
                return EventCounts.Row(day: day, type: type, count: row["count"])
            }
        }
    }

    public func deleteEvents(correctedBefore date: Date, limit: Int) async throws -> Int {
        try await writer.write { db in
            let cutoff = date.millisecondsSince1970
            var removed = 0
            // Per application, through the (application_id, corrected_time) index.
            for applicationId in try String.fetchAll(db, sql: "SELECT id FROM applications") where removed < limit {
                let ids = try Int64.fetchAll(
                    db, sql: "SELECT id FROM events WHERE application_id = ? AND corrected_time < ? ORDER BY corrected_time LIMIT ?",
                    arguments: [applicationId, cutoff, limit - removed])
                guard !ids.isEmpty else { continue }
                let list = ids.map(String.init).joined(separator: ",")
                try db.execute(sql: """
                    INSERT INTO event_floors (application_id, device_id, deleted_through)
                    SELECT application_id, device_id, MAX(sequence) FROM events WHERE id IN (\(list)) GROUP BY application_id, device_id
                    ON CONFLICT (application_id, device_id) DO UPDATE SET deleted_through = MAX(deleted_through, excluded.deleted_through)
                    """)
                try db.execute(sql: "DELETE FROM events WHERE id IN (\(list))")
                removed += ids.count
            }
            return removed
        }
    }

    private static func conditions(applicationId: String, _ filter: EventFilter) -> ([String], [(any DatabaseValueConvertible)?]) {
        var conditions = ["application_id = ?"]
        var arguments: [(any DatabaseValueConvertible)?] = [applicationId]
        let equalities: [(String, String?)] = [
            ("type", filter.type?.rawValue), ("user_id", filter.userId), ("device_id", filter.deviceId), ("asset_id", filter.assetId),
        ]
        for case let (column, value?) in equalities {
            conditions.append("\(column) = ?")
            arguments.append(value)
        }
        if let from = filter.from {
            conditions.append("corrected_time >= ?")
            arguments.append(from.millisecondsSince1970)
        }
        if let to = filter.to {
            conditions.append("corrected_time < ?")
            arguments.append(to.millisecondsSince1970)
        }
        return (conditions, arguments)
    }

    private static func eventRecord(_ row: Row) -> EventRecord {
        let content = EventContent(
            type: EventType(rawValue: row["type"]) ?? .custom, assetId: row["asset_id"],
            deletionReason: (row["deletion_reason"] as String?).flatMap(AssetDeletionReason.init(rawValue:)),
            resetType: (row["reset_type"] as String?).flatMap(ResetType.init(rawValue:)),
            limitType: (row["limit_type"] as String?).flatMap(DownloadLimitType.init(rawValue:)),
            bitrate: row["bitrate"], durationSeconds: row["duration_seconds"], errorCode: row["error_code"], errorMessage: row["error_message"],
            customName: row["custom_name"], customString: row["custom_string"], customNumber: row["custom_number"])
        let event = DeviceEvent(
            eventId: row["event_id"], sequence: row["sequence"], deviceTime: Date(millisecondsSince1970: row["device_time"]),
            appState: (row["app_state"] as String?).flatMap(AppState.init(rawValue:)), platform: row["platform"],
            sdkVersion: row["sdk_version"], appVersion: row["app_version"], userId: row["user_id"],
            externalDeviceId: row["external_device_id"], content: content)
        return EventRecord(
            rowId: row["id"], applicationId: row["application_id"], deviceId: row["device_id"], event: event,
            receivedAt: Date(millisecondsSince1970: row["received_at"]), correctedTime: Date(millisecondsSince1970: row["corrected_time"]))
    }

    private static func feed(_ db: Database, applicationId: String, feedId: String) throws -> FeedRecord? {
        try FeedRecord.fetchOne(db, key: ["application_id": applicationId, "feed_id": feedId])
    }

    private static func liveEpisodes(_ db: Database, applicationId: String, feedId: String, limit: Int?) throws -> [EpisodeRecord] {
        var request = EpisodeRecord
            .filter(Column("application_id") == applicationId && Column("feed_id") == feedId && Column("retracted_at") == nil)
            .order(Column("announced_at").desc, Column("asset_id").desc)
        if let limit { request = request.limit(limit) }
        return try request.fetchAll(db)
    }

    private static func latestSeq(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(db, sql: "SELECT MAX(seq) FROM episode_changes") ?? 0
    }

    private static func appendChange(_ db: Database, _ write: EpisodeWrite) throws {
        let snapshot = write.kind == .retracted ? nil : String(decoding: try snapshotEncoder.encode(write.record), as: UTF8.self)
        try db.execute(
            sql: "INSERT INTO episode_changes (application_id, feed_id, asset_id, kind, snapshot) VALUES (?, ?, ?, ?, ?)",
            arguments: [write.record.applicationId, write.record.feedId, write.record.assetId, write.kind.rawValue, snapshot])
    }

    private static let snapshotEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        return encoder
    }()

    private static let snapshotDecoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        return decoder
    }()

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

/// The event log's tables. One flat row per event (no JSON): every field is a column the
/// reporting API can filter or export, and ingestion is one prepared INSERT per event.
/// `benchmarks/ingest` reads this schema from a served database for its baseline. Migration v4
/// runs `sql` as it is: never edit it once shipped; a schema change is a new migration.
enum EventsSchema {
    static let sql = """
        CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            application_id TEXT NOT NULL,
            device_id TEXT NOT NULL,
            sequence INTEGER NOT NULL,
            event_id TEXT NOT NULL,
            type TEXT NOT NULL,
            device_time INTEGER NOT NULL,
            received_at INTEGER NOT NULL,
            corrected_time INTEGER NOT NULL,
            user_id TEXT NOT NULL,
            external_device_id TEXT,
            app_state TEXT,
            platform TEXT,
            sdk_version TEXT,
            app_version TEXT,
            asset_id TEXT,
            deletion_reason TEXT,
            reset_type TEXT,
            limit_type TEXT,
            bitrate INTEGER,
            duration_seconds REAL,
            error_code TEXT,
            error_message TEXT,
            custom_name TEXT,
            custom_string TEXT,
            custom_number REAL
        );
        CREATE UNIQUE INDEX events_by_device ON events (application_id, device_id, sequence);
        CREATE INDEX events_by_time ON events (application_id, corrected_time);
        CREATE INDEX events_by_user ON events (application_id, user_id, corrected_time);
        CREATE INDEX events_by_asset ON events (application_id, asset_id, corrected_time);
        CREATE TABLE event_floors (
            application_id TEXT NOT NULL,
            device_id TEXT NOT NULL,
            deleted_through INTEGER NOT NULL,
            PRIMARY KEY (application_id, device_id)
        ) WITHOUT ROWID;
        """

    static let insert = """
        INSERT INTO events (
            application_id, device_id, sequence, event_id, type, device_time, received_at, corrected_time,
            user_id, external_device_id, app_state, platform, sdk_version, app_version,
            asset_id, deletion_reason, reset_type, limit_type, bitrate, duration_seconds, error_code, error_message,
            custom_name, custom_string, custom_number
        ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (application_id, device_id, sequence) DO NOTHING
        """
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

extension FeedRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "feeds" }
}

extension EpisodeRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "episodes" }
}

extension SubscriptionRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "subscriptions" }
}

extension TokenScope: DatabaseValueConvertible {}
extension CommandType: DatabaseValueConvertible {}
extension CommandState: DatabaseValueConvertible {}
