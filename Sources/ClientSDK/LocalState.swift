import Foundation
import GRDB
import BackplaneWire

/// Where the device's identity lives: its id and its device key (a P-256 private key, which
/// proves to the backplane that a later registration of the id comes from this install). Keep
/// both in the same place, so they survive or vanish together: the default is files in the data
/// directory; an app on Apple platforms can supply a Keychain-backed store so the identity
/// survives reinstalls. A store that kept the id but lost the key cannot register the id again
/// (409 `device_already_registered`) until an admin releases it.
public protocol DeviceIdentityStore: Sendable {
    func loadDeviceId() throws -> String?
    func saveDeviceId(_ deviceId: String) throws
    /// The device key's raw representation (32 bytes), or nil before the first start.
    func loadDeviceKey() throws -> Data?
    func saveDeviceKey(_ key: Data) throws
}

/// Keeps the device id in `device-id` and the device key in `device-key` inside a directory,
/// written atomically; the key file is readable by its owner only.
public struct FileDeviceIdentityStore: DeviceIdentityStore {
    public let file: URL
    public let keyFile: URL

    public init(directory: URL) {
        self.file = directory.appendingPathComponent("device-id")
        self.keyFile = directory.appendingPathComponent("device-key")
    }

    public func loadDeviceId() throws -> String? {
        guard FileManager.default.fileExists(atPath: file.path) else { return nil }
        let text = try String(contentsOf: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : text
    }

    public func saveDeviceId(_ deviceId: String) throws {
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(deviceId.utf8).write(to: file, options: .atomic)
    }

    public func loadDeviceKey() throws -> Data? {
        guard FileManager.default.fileExists(atPath: keyFile.path) else { return nil }
        let data = try Data(contentsOf: keyFile)
        return data.isEmpty ? nil : data
    }

    public func saveDeviceKey(_ key: Data) throws {
        try FileManager.default.createDirectory(at: keyFile.deletingLastPathComponent(), withIntermediateDirectories: true)
        // Written owner-only from the start: the key never exists on disk readable by others.
        let temporary = keyFile.appendingPathExtension("tmp-\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: temporary.path, contents: key, attributes: [.posixPermissions: 0o600]) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: temporary.path])
        }
        if FileManager.default.fileExists(atPath: keyFile.path) {
            _ = try FileManager.default.replaceItemAt(keyFile, withItemAt: temporary)
        } else {
            try FileManager.default.moveItem(at: temporary, to: keyFile)
        }
    }
}

/// What the SDK remembers of its registration.
struct StoredRegistration: Codable, Sendable, Equatable {
    var credentials: DeviceCredentials
    var userId: String
    var registeredAt: Date
}

/// What the SDK remembers of its last successful sync.
struct StoredSync: Codable, Sendable, Equatable {
    var device: Device
    var settings: ApplicationSettings
    var serverTime: Date
    var syncedAt: Date
    /// Server time minus device time, in seconds, estimated at that sync.
    var clockOffset: TimeInterval
}

/// The SDK's on-device database (`backplane-sdk.sqlite` in the data directory): small named
/// records, each written in its own transaction so a crash never leaves half of one.
final class LocalStore: Sendable {
    let queue: DatabaseQueue

    init(directory: URL) throws {
        // The database holds the device credential: the directory and the database's files are
        // the app's user's alone, whatever the umask (apps in a sandbox have one of their own;
        // Linux apps and the harness share the machine with other users).
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory.path)
        let database = Self.path(in: directory)
        if !FileManager.default.fileExists(atPath: database.path) {
            // Created owner-only before SQLite opens it: its WAL and shared-memory files take
            // the database file's mode.
            _ = FileManager.default.createFile(atPath: database.path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: database.path + suffix) {
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: database.path + suffix)
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        // WAL: one fsync per commit instead of a rollback journal's several, which keeps
        // `EventLogger.log` cheap; FULL: a commit survives power loss, not only a crash.
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        queue = try DatabaseQueue(path: database.path, configuration: configuration)
        try Self.migrator.migrate(queue)
    }

    static func path(in directory: URL) -> URL {
        directory.appendingPathComponent("backplane-sdk.sqlite")
    }

    /// Shipped migrations never change.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: state records") { db in
            try db.create(table: "state") { t in
                t.primaryKey("name", .text)
                t.column("json", .blob).notNull()
                t.column("updated_at", .datetime).notNull()
            }
        }
        migrator.registerMigration("v2: assets and command outcomes") { db in
            try db.create(table: "assets") { t in
                t.primaryKey("asset_id", .text)
                t.column("relative_path", .text).notNull()
                t.column("size", .integer).notNull()
                t.column("added_at", .datetime).notNull()
            }
            try db.create(table: "command_outcomes") { t in
                t.primaryKey("command_id", .text)
                t.column("type", .text).notNull()
                t.column("outcome", .text).notNull()
                t.column("reason", .text)
                t.column("executed_at", .datetime).notNull()
                t.column("acked_at", .datetime)
            }
        }
        migrator.registerMigration("v3: subscription items") { db in
            try db.create(table: "subscription_items") { t in
                t.primaryKey("asset_id", .text)
                t.column("feed_id", .text).notNull()
                t.column("metadata", .blob).notNull()
                t.column("state", .text).notNull()
                t.column("via_subscription", .boolean).notNull()
                t.column("added_at", .datetime).notNull()
                t.column("updated_at", .datetime).notNull()
            }
            try db.create(index: "subscription_items_by_feed", on: "subscription_items", columns: ["feed_id", "added_at"])
        }
        migrator.registerMigration("v4: event queue") { db in
            try db.create(table: "event_queue") { t in
                t.primaryKey("sequence", .integer)
                t.column("json", .blob).notNull()
                t.column("logged_at", .datetime).notNull()
            }
            // One row: the next sequence number. Kept apart from the queue, which empties.
            try db.create(table: "event_sequence") { t in
                t.primaryKey("id", .integer).check { $0 == 1 }
                t.column("next", .integer).notNull()
            }
        }
        migrator.registerMigration("v5: download queue") { db in
            try db.create(table: "downloads") { t in
                t.primaryKey("asset_id", .text)
                t.column("position", .integer).notNull()
                t.column("request", .blob).notNull()
                t.column("paused", .boolean).notNull().defaults(to: false)
                t.column("failed", .boolean).notNull().defaults(to: false)
                t.column("error_count", .integer).notNull().defaults(to: 0)
                t.column("last_failure", .blob)
                t.column("bytes_downloaded", .integer).notNull().defaults(to: 0)
                t.column("expected_bytes", .integer)
                t.column("expected_is_estimate", .boolean).notNull().defaults(to: false)
                t.column("added_at", .datetime).notNull()
            }
            try db.create(index: "downloads_by_position", on: "downloads", columns: ["position"])
            // What a completed download came from; null for files the app copied in.
            try db.alter(table: "assets") { t in t.add(column: "request", .blob) }
        }
        migrator.registerMigration("v6: download grants and their reports") { db in
            // The backplane's grant of a queued or completed download, when it was asked for one.
            try db.alter(table: "downloads") { t in t.add(column: "grant_id", .text) }
            try db.alter(table: "assets") { t in t.add(column: "grant_id", .text) }
            // What became of granted downloads, kept until a sync's answer settles each.
            try db.create(table: "grant_reports") { t in
                t.primaryKey("grant_id", .text)
                t.column("outcome", .text).notNull()
                t.column("recorded_at", .datetime).notNull()
            }
        }
        migrator.registerMigration("v7: rights") { db in
            // The window the backplane granted, and the license the app's provider holds.
            // The backplane's last denial, until a grant replaces it.
            try db.alter(table: "downloads") { t in
                t.add(column: "window", .blob)
                t.add(column: "license", .blob)
                t.add(column: "denial", .blob)
            }
            // Also when the download completed and when it was first played, in trusted time.
            try db.alter(table: "assets") { t in
                t.add(column: "window", .blob)
                t.add(column: "license", .blob)
                t.add(column: "downloaded_at", .datetime)
                t.add(column: "first_played_at", .datetime)
            }
        }
        return migrator
    }

    // MARK: event queue

    /// Gives the event the next sequence number and queues it, in one transaction: when this
    /// returns, the event is on disk.
    ///
    /// The first number of a new database is the current time in milliseconds × 1000, not 1:
    /// the device id can outlive this database (a Keychain survives reinstalls), and a reinstall
    /// starting again at 1 would have its events taken for retries of the old install's.
    func enqueueEvent(_ make: (Int64) -> DeviceEvent) throws -> DeviceEvent {
        try queue.write { db in
            let next = try Int64.fetchOne(db, sql: "SELECT next FROM event_sequence WHERE id = 1")
                ?? (Int64(nonNegative: Date().timeIntervalSince1970 * 1000)?.multipliedClamped(by: 1000) ?? 1)
            let event = make(next)
            try db.execute(
                sql: "INSERT INTO event_queue (sequence, json, logged_at) VALUES (?, ?, ?)",
                arguments: [event.sequence, try Self.encoder.encode(event), Date()])
            try db.execute(
                sql: "INSERT INTO event_sequence (id, next) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET next = excluded.next",
                arguments: [next.addingClamped(1)])
            return event
        }
    }

    /// The oldest queued events, by sequence.
    func queuedEvents(limit: Int) throws -> [DeviceEvent] {
        try queue.read { db in
            try Data.fetchAll(db, sql: "SELECT json FROM event_queue ORDER BY sequence LIMIT ?", arguments: [limit]).map {
                try Self.decoder.decode(DeviceEvent.self, from: $0)
            }
        }
    }

    /// How many events wait, and when the oldest was logged.
    func eventQueueState() throws -> (count: Int, oldest: Date?) {
        try queue.read { db in
            let row = try Row.fetchOne(db, sql: "SELECT COUNT(*) AS count, MIN(logged_at) AS oldest FROM event_queue")
            return (try row?.decode(Int?.self, forColumn: "count") ?? 0, try row?.decode(Date?.self, forColumn: "oldest"))
        }
    }

    func deleteQueuedEvents(_ sequences: [Int64]) throws {
        guard !sequences.isEmpty else { return }
        try queue.write { db in
            for sequence in sequences {
                try db.execute(sql: "DELETE FROM event_queue WHERE sequence = ?", arguments: [sequence])
            }
        }
    }

    // MARK: subscription items

    func item(assetId: String) throws -> SubscriptionItem? {
        try queue.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM subscription_items WHERE asset_id = ?", arguments: [assetId]).map(Self.item)
        }
    }

    /// Items of a feed (all feeds when nil), oldest first.
    func items(feedId: String?) throws -> [SubscriptionItem] {
        try queue.read { db in
            let rows = try feedId.map {
                try Row.fetchAll(db, sql: "SELECT * FROM subscription_items WHERE feed_id = ? ORDER BY added_at, asset_id", arguments: [$0])
            } ?? Row.fetchAll(db, sql: "SELECT * FROM subscription_items ORDER BY added_at, asset_id")
            return try rows.map(Self.item)
        }
    }

    func saveItem(_ item: SubscriptionItem) throws {
        let metadata = try Self.encoder.encode(item.metadata)
        try queue.write { db in try Self.saveItem(item, metadata: metadata, db) }
    }

    static func saveItem(_ item: SubscriptionItem, metadata: Data, _ db: Database) throws {
        try db.execute(sql: """
            INSERT INTO subscription_items (asset_id, feed_id, metadata, state, via_subscription, added_at, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(asset_id) DO UPDATE SET feed_id = excluded.feed_id, metadata = excluded.metadata, state = excluded.state,
              via_subscription = excluded.via_subscription, updated_at = excluded.updated_at
            """, arguments: [item.assetId, item.feedId, metadata, item.state.rawValue, item.viaSubscription, item.addedAt, Date()])
    }

    func deleteItem(assetId: String) throws {
        try queue.write { db in try db.execute(sql: "DELETE FROM subscription_items WHERE asset_id = ?", arguments: [assetId]) }
    }

    static func item(_ row: Row) throws -> SubscriptionItem {
        try SubscriptionItem(
            assetId: row.decode(forColumn: "asset_id"), feedId: row.decode(forColumn: "feed_id"),
            metadata: try decoder.decode(EpisodeInput.self, from: row.decode(Data.self, forColumn: "metadata")),
            state: SubscriptionItem.State(rawValue: row.decode(forColumn: "state")) ?? .queued,
            viaSubscription: row.decode(forColumn: "via_subscription"), addedAt: row.decode(forColumn: "added_at"))
    }

    // MARK: command outcomes

    struct Outcome: Sendable {
        var ack: CommandAck
        var type: CommandType
    }

    func hasOutcome(commandId: String) throws -> Bool {
        try queue.read { db in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM command_outcomes WHERE command_id = ?", arguments: [commandId]) ?? false
        }
    }

    func recordOutcome(_ outcome: Outcome) throws {
        try queue.write { db in
            try db.execute(
                sql: "INSERT INTO command_outcomes (command_id, type, outcome, reason, executed_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT(command_id) DO NOTHING",
                arguments: [outcome.ack.commandId, outcome.type.rawValue, outcome.ack.outcome.rawValue, outcome.ack.reason, Date()])
        }
    }

    /// Outcomes the server has not confirmed yet, oldest first.
    func unacknowledgedOutcomes(limit: Int) throws -> [Outcome] {
        try queue.read { db in
            try Row.fetchAll(
                db, sql: "SELECT command_id, type, outcome, reason FROM command_outcomes WHERE acked_at IS NULL ORDER BY executed_at LIMIT ?",
                arguments: [limit]
            ).compactMap { row in
                guard let type = CommandType(rawValue: try row.decode(forColumn: "type")),
                    let outcome = CommandAck.Outcome(rawValue: try row.decode(forColumn: "outcome"))
                else { return nil }
                return try Outcome(ack: CommandAck(commandId: row.decode(forColumn: "command_id"), outcome: outcome, reason: row.decode(forColumn: "reason")), type: type)
            }
        }
    }

    func markAcknowledged(_ commandIds: [String]) throws {
        guard !commandIds.isEmpty else { return }
        try queue.write { db in
            for id in commandIds {
                try db.execute(sql: "UPDATE command_outcomes SET acked_at = ? WHERE command_id = ? AND acked_at IS NULL", arguments: [Date(), id])
            }
        }
    }

    enum Key: String {
        case registration
        case lastSync = "last-sync"
        case feedCursor = "feed-cursor"
        case downloadsSwitchedOff = "downloads-switched-off"
        case trustedClock = "trusted-clock"
        case unflushedDownloads = "unflushed-downloads"
    }

    func load<Value: Decodable>(_ type: Value.Type, _ key: Key) throws -> Value? {
        try queue.read { db in
            guard let data = try Data.fetchOne(db, sql: "SELECT json FROM state WHERE name = ?", arguments: [key.rawValue]) else {
                return nil
            }
            return try Self.decoder.decode(Value.self, from: data)
        }
    }

    func save(_ value: (some Encodable)?, _ key: Key) throws {
        let data = try value.map { try Self.encoder.encode($0) }
        try queue.write { db in
            if let data {
                try db.execute(
                    sql: "INSERT INTO state (name, json, updated_at) VALUES (?, ?, ?) ON CONFLICT(name) DO UPDATE SET json = excluded.json, updated_at = excluded.updated_at",
                    arguments: [key.rawValue, data, Date()])
            } else {
                try db.execute(sql: "DELETE FROM state WHERE name = ?", arguments: [key.rawValue])
            }
        }
    }

    static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        return encoder
    }

    static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        return decoder
    }
}
