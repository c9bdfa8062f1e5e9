import Foundation
import GRDB
import Shared

/// Where the device id lives. The default is a file in the data directory; an app on Apple
/// platforms can supply a Keychain-backed store so the id survives reinstalls.
public protocol DeviceIdentityStore: Sendable {
    func loadDeviceId() throws -> String?
    func saveDeviceId(_ deviceId: String) throws
}

/// Keeps the device id in `device-id` inside a directory, written atomically.
public struct FileDeviceIdentityStore: DeviceIdentityStore {
    public let file: URL

    public init(directory: URL) {
        self.file = directory.appendingPathComponent("device-id")
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
    private let queue: DatabaseQueue

    init(directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        queue = try DatabaseQueue(path: directory.appendingPathComponent("backplane-sdk.sqlite").path, configuration: configuration)
        try Self.migrator.migrate(queue)
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
        return migrator
    }

    enum Key: String {
        case registration
        case lastSync = "last-sync"
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

    private static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        return encoder
    }

    private static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        return decoder
    }
}
