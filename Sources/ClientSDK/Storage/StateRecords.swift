import Foundation
import GRDB
import BackplaneWire

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

/// Small named records (`Key`), each a JSON value written in its own transaction.
extension SDKDatabase {
    enum Key: String {
        case registration
        case lastSync = "last-sync"
        case feedCursor = "feed-cursor"
        case downloadsSwitchedOff = "downloads-switched-off"
        case trustedClock = "trusted-clock"
        case unflushedDownloads = "unflushed-downloads"
    }

    func load<Value: Decodable>(_ type: Value.Type, _ key: Key) throws -> Value? {
        try read { db in
            guard let data = try Data.fetchOne(db, sql: "SELECT json FROM state WHERE name = ?", arguments: [key.rawValue]) else {
                return nil
            }
            return try Self.decoder.decode(Value.self, from: data)
        }
    }

    func save(_ value: (some Encodable)?, _ key: Key) throws {
        let data = try value.map { try Self.encoder.encode($0) }
        try write { db in
            if let data {
                try db.execute(
                    sql: "INSERT INTO state (name, json, updated_at) VALUES (?, ?, ?) ON CONFLICT(name) DO UPDATE SET json = excluded.json, updated_at = excluded.updated_at",
                    arguments: [key.rawValue, data, Date()])
            } else {
                try db.execute(sql: "DELETE FROM state WHERE name = ?", arguments: [key.rawValue])
            }
        }
    }
}
