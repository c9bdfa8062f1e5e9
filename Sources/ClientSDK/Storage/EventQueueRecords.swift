import Foundation
import GRDB
import BackplaneWire

/// The event queue: events logged and not yet uploaded, numbered in one sequence per database.
extension SDKDatabase {
    /// Gives the event the next sequence number and queues it, in one transaction: when this
    /// returns, the event is on disk.
    ///
    /// The first number of a new database is the current time in milliseconds × 1000, not 1:
    /// the device id can outlive this database (a Keychain survives reinstalls), and a reinstall
    /// starting again at 1 would have its events taken for retries of the old install's.
    func enqueueEvent(_ make: (Int64) -> DeviceEvent) throws -> DeviceEvent {
        try write { db in
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
        try read { db in
            try Data.fetchAll(db, sql: "SELECT json FROM event_queue ORDER BY sequence LIMIT ?", arguments: [limit]).map {
                try Self.decoder.decode(DeviceEvent.self, from: $0)
            }
        }
    }

    /// How many events wait, and when the oldest was logged.
    func eventQueueState() throws -> (count: Int, oldest: Date?) {
        try read { db in
            let row = try Row.fetchOne(db, sql: "SELECT COUNT(*) AS count, MIN(logged_at) AS oldest FROM event_queue")
            return (try row?.decode(Int?.self, forColumn: "count") ?? 0, try row?.decode(Date?.self, forColumn: "oldest"))
        }
    }

    func deleteQueuedEvents(_ sequences: [Int64]) throws {
        guard !sequences.isEmpty else { return }
        try write { db in
            for sequence in sequences {
                try db.execute(sql: "DELETE FROM event_queue WHERE sequence = ?", arguments: [sequence])
            }
        }
    }
}
