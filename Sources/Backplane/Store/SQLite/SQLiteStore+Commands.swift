import Foundation
import GRDB
import BackplaneWire

/// The command queue: commands by device in delivery order.
extension SQLiteStore {
    public func insertCommands(_ commands: [CommandRecord]) async throws -> [CommandRecord] {
        try await write { db in
            try commands.map { command in
                var command = command
                try command.insert(db)
                return command
            }
        }
    }

    public func command(applicationId: String, commandId: String) async throws -> CommandRecord? {
        try await read { db in try Self.command(db, applicationId: applicationId, commandId: commandId) }
    }

    public func commands(applicationId: String, deviceId: String) async throws -> [CommandRecord] {
        try await read { db in
            try CommandRecord
                .filter { $0.applicationId == applicationId && $0.deviceId == deviceId }
                .order(\.rowId)
                .fetchAll(db)
        }
    }

    public func commands(applicationId: String, filter: CommandFilter, beforeRowId: Int64?, limit: Int) async throws -> [CommandRecord] {
        try await read { db in
            var request = CommandRecord.filter { $0.applicationId == applicationId }
            if let deviceId = filter.deviceId { request = request.filter { $0.deviceId == deviceId } }
            if let state = filter.state { request = request.filter { $0.state == state.rawValue } }
            if let type = filter.type { request = request.filter { $0.type == type.rawValue } }
            if let beforeRowId { request = request.filter { $0.rowId < beforeRowId } }
            return try request.order(\.rowId.desc).limit(limit).fetchAll(db)
        }
    }

    public func expireCommands(at now: Date, limit: Int) async throws -> Int {
        try await write { db in
            try db.execute(sql: """
                UPDATE commands SET \(CommandExpiry.expireSQL), updated_at = ?
                WHERE row_id IN (
                    SELECT row_id FROM commands WHERE \(CommandExpiry.isPastExpirySQL(now: "?")) ORDER BY expires_at LIMIT ?)
                """, arguments: [now, now, limit])
            return db.changesCount
        }
    }

    public func commandCounts(applicationId: String, at now: Date) async throws -> [CommandState: Int] {
        try await read { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT \(CommandExpiry.shownStateSQL(now: "?")) AS state, COUNT(*) AS n
                FROM commands WHERE application_id = ? GROUP BY 1
                """, arguments: [now, applicationId])
            return CommandState.counts(rows.map { ($0["state"] as String, $0["n"] as Int) })
        }
    }

    public func updateCommand(
        applicationId: String, commandId: String, _ change: @escaping @Sendable (CommandRecord) throws -> CommandRecord
    ) async throws -> CommandRecord? {
        try await write { db in
            guard let existing = try Self.command(db, applicationId: applicationId, commandId: commandId) else { return nil }
            let updated = try change(existing)
            if updated != existing { try CommandRecord.update(db, updated) }
            return updated
        }
    }

    /// A device's pending and delivered commands in enqueue order. Sorted here, not by SQLite:
    /// ordered by row id, SQLite would walk the device's whole command history in row-id order
    /// instead of searching the open states.
    static func openCommands(_ db: Database, applicationId: String, deviceId: String) throws -> [CommandRecord] {
        try Array(ColumnCursor(
            db.cachedStatement(sql: "SELECT \(CommandRecord.selectSQL) FROM commands WHERE application_id = ? AND device_id = ? AND state IN ('pending', 'delivered')"),
            arguments: [applicationId, deviceId], element: { try CommandRecord(columns: $0) }))
            .sorted { ($0.rowId ?? 0) < ($1.rowId ?? 0) }
    }

    static func command(_ db: Database, applicationId: String, commandId: String) throws -> CommandRecord? {
        try ColumnCursor(
            db.cachedStatement(sql: "SELECT \(CommandRecord.selectSQL) FROM commands WHERE application_id = ? AND command_id = ?"),
            arguments: [applicationId, commandId], element: { try CommandRecord(columns: $0) }
        ).next()
    }
}
