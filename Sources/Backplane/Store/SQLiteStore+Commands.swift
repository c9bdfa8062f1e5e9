import Foundation
import GRDB
import BackplaneWire

/// The command queue: commands by device in delivery order, and the sync that acknowledges and delivers them.
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

    public func deviceWithOpenCommands(applicationId: String, deviceId: String) async throws -> (DeviceRecord, [CommandRecord])? {
        try await pointRead { db in
            var device: DeviceRecord?  // from the first row; the others repeat it
            let commands = try Array(ColumnCursor(
                db.cachedStatement(sql: Self.deviceWithOpenCommandsSQL), arguments: [applicationId, deviceId],
                element: { columns -> CommandRecord? in
                    if device == nil { device = try DeviceRecord(columns: columns) }
                    let commandColumns = ShiftedColumns(base: columns, offset: DeviceRecord.columnNames.count)
                    return try (commandColumns.value(0) as Int64?).map { _ in try CommandRecord(columns: commandColumns) }
                }))
            guard let device else { return nil }
            return (device, commands.compactMap { $0 }.sorted { ($0.rowId ?? 0) < ($1.rowId ?? 0) })
        }
    }

    /// The device and its open commands in one statement, and so from one snapshot: a statement
    /// outside a transaction takes and drops SQLite's read locks, and the second statement, for
    /// the open commands a quiet sync's device does not have, was a third of that read in a
    /// profile. A row per open command, the device's columns then the command's; or one row with
    /// the command's columns NULL.
    private static let deviceWithOpenCommandsSQL = """
        SELECT \(qualified(DeviceRecord.columnNames, by: "d")), \(qualified(CommandRecord.columnNames, by: "c"))
        FROM devices d LEFT JOIN commands c
            ON c.application_id = d.application_id AND c.device_id = d.device_id AND c.state IN ('pending', 'delivered')
        WHERE d.application_id = ? AND d.device_id = ?
        """

    /// Column names for a select list, each as `alias.name`.
    private static func qualified(_ names: [String], by alias: String) -> String {
        names.map { "\(alias).\($0)" }.joined(separator: ", ")
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
                UPDATE commands SET state = 'expired', completed_at = expires_at, updated_at = ?
                WHERE row_id IN (
                    SELECT row_id FROM commands WHERE state IN ('pending', 'delivered') AND expires_at <= ? ORDER BY expires_at LIMIT ?)
                """, arguments: [now, now, limit])
            return db.changesCount
        }
    }

    public func commandCounts(applicationId: String) async throws -> [CommandState: Int] {
        try await read { db in
            let rows = try Row.fetchAll(
                db, sql: "SELECT state, COUNT(*) AS n FROM commands WHERE application_id = ? GROUP BY state", arguments: [applicationId])
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

    public func syncCommands(
        applicationId: String, deviceId: String, acks: [CommandAck], rules: CommandSyncRules, signedRequest: SignedRequestRecord?
    ) async throws -> (results: [CommandAckResult], open: [CommandRecord]) {
        // A quiet sync (no acks, nothing newly delivered or expired) changes nothing: answered
        // from a read, it takes no write lock and waits for no commit.
        if acks.isEmpty, signedRequest == nil {
            let open = try await read { db in try Self.openCommands(db, applicationId: applicationId, deviceId: deviceId) }
            if open.allSatisfy({ rules.deliver($0) == $0 }) { return ([], open) }
        }
        return try await write(spending: signedRequest) { db in
            var results: [CommandAckResult] = []
            for ack in acks {
                let existing = try Self.command(db, applicationId: applicationId, commandId: ack.commandId)
                let decision = rules.applyAck(ack, existing)
                if let updated = decision.updated, updated != existing { try CommandRecord.update(db, updated) }
                if let release = decision.releasesGrants {
                    let assetIds: [String]? = switch release {
                    case .all: nil
                    case .assets(let ids): ids
                    }
                    try Self.releaseGrants(db, applicationId: applicationId, deviceId: deviceId, assetIds: assetIds, at: rules.now)
                }
                if decision.detachesDevice, let device = try Self.device(db, applicationId: applicationId, deviceId: deviceId) {
                    let detached = rules.detach(device)
                    if detached != device {
                        try detached.update(db)
                        try Self.releaseGrants(db, applicationId: applicationId, deviceId: deviceId, assetIds: nil, at: rules.now)
                    }
                }
                results.append(decision.result)
            }
            let open = try Self.openCommands(db, applicationId: applicationId, deviceId: deviceId)
            var stillOpen: [CommandRecord] = []
            for command in open {
                let delivered = rules.deliver(command)
                if delivered != command { try CommandRecord.update(db, delivered) }
                if !delivered.state.isFinished { stillOpen.append(delivered) }
            }
            return (results, stillOpen)
        }
    }

    /// A device's pending and delivered commands in enqueue order. Sorted here, not by SQLite:
    /// ordered by row id, SQLite would walk the device's whole command history in row-id order
    /// instead of searching the open states.
    private static func openCommands(_ db: Database, applicationId: String, deviceId: String) throws -> [CommandRecord] {
        try Array(ColumnCursor(
            db.cachedStatement(sql: "SELECT \(CommandRecord.selectSQL) FROM commands WHERE application_id = ? AND device_id = ? AND state IN ('pending', 'delivered')"),
            arguments: [applicationId, deviceId], element: { try CommandRecord(columns: $0) }))
            .sorted { ($0.rowId ?? 0) < ($1.rowId ?? 0) }
    }

    private static func command(_ db: Database, applicationId: String, commandId: String) throws -> CommandRecord? {
        try ColumnCursor(
            db.cachedStatement(sql: "SELECT \(CommandRecord.selectSQL) FROM commands WHERE application_id = ? AND command_id = ?"),
            arguments: [applicationId, commandId], element: { try CommandRecord(columns: $0) }
        ).next()
    }
}
