import Foundation
import PostgresNIO
import BackplaneWire

/// The command queue. A command changes state only under its row lock (`FOR UPDATE`), so a
/// cancel and a delivery on two nodes never both win.
extension PostgresStore {
    public func insertCommands(_ commands: [CommandRecord]) async throws -> [CommandRecord] {
        try await transaction { [logger] connection in
            var inserted: [CommandRecord] = []
            for var command in commands {
                command.rowId = try await connection.rows("""
                    INSERT INTO commands (
                        command_id, application_id, device_id, type, asset_ids, state, created_at, updated_at, expires_at,
                        delivered_at, completed_at, failure_reason, deferrals)
                    VALUES (
                        \(command.commandId), \(command.applicationId), \(command.deviceId), \(command.type.rawValue), \(command.assetIds),
                        \(command.state.rawValue), \(command.createdAt), \(command.updatedAt), \(command.expiresAt), \(command.deliveredAt),
                        \(command.completedAt), \(command.failureReason), \(command.deferrals))
                    RETURNING row_id
                    """, logger: logger).first?.decode(Int64.self)
                inserted.append(command)
            }
            return inserted
        }
    }

    public func command(applicationId: String, commandId: String) async throws -> CommandRecord? {
        try await rows("""
            SELECT \(unescaped: PostgresColumns.command) FROM commands WHERE application_id = \(applicationId) AND command_id = \(commandId)
            """).records(CommandRecord.init).first
    }

    public func commands(applicationId: String, deviceId: String) async throws -> [CommandRecord] {
        try await rows("""
            SELECT \(unescaped: PostgresColumns.command) FROM commands
            WHERE application_id = \(applicationId) AND device_id = \(deviceId) ORDER BY row_id
            """).records(CommandRecord.init)
    }

    public func commands(applicationId: String, filter: CommandFilter, beforeRowId: Int64?, limit: Int) async throws -> [CommandRecord] {
        // Each optional condition is written so that a NULL parameter switches it off.
        try await rows("""
            SELECT \(unescaped: PostgresColumns.command) FROM commands
            WHERE application_id = \(applicationId)
              AND (\(filter.deviceId)::text IS NULL OR device_id = \(filter.deviceId))
              AND (\(filter.state?.rawValue)::text IS NULL OR state = \(filter.state?.rawValue))
              AND (\(filter.type?.rawValue)::text IS NULL OR type = \(filter.type?.rawValue))
              AND row_id < \(beforeRowId ?? Int64.max)
            ORDER BY row_id DESC LIMIT \(limit)
            """).records(CommandRecord.init)
    }

    public func expireCommands(at now: Date, limit: Int) async throws -> Int {
        // SKIP LOCKED: a command another node is acknowledging or cancelling is left to that
        // transaction, and to the next pass if it stays open.
        // Binds by position: $1 is now, written into the rule's conditions.
        var binds = PostgresBindings()
        binds.append(now)
        binds.append(Int64(limit))
        // The batch is chosen once, in a CTE: as an `IN (subquery)` the planner may run the
        // subquery again for each row, and its LIMIT then bounds nothing.
        let rows = try await rows(PostgresQuery(unsafeSQL: """
            WITH due AS (
                SELECT row_id FROM commands WHERE \(CommandExpiry.isPastExpirySQL(now: "$1"))
                ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)
            UPDATE commands SET \(CommandExpiry.expireSQL), updated_at = $1 FROM due WHERE commands.row_id = due.row_id
            RETURNING commands.row_id
            """, binds: binds))
        return rows.count
    }

    public func commandCounts(applicationId: String, at now: Date) async throws -> [CommandState: Int] {
        var binds = PostgresBindings()
        binds.append(now)
        binds.append(applicationId)
        let rows = try await rows(PostgresQuery(unsafeSQL: """
            SELECT \(CommandExpiry.shownStateSQL(now: "$1")), COUNT(*) FROM commands WHERE application_id = $2 GROUP BY 1
            """, binds: binds))
        return CommandState.counts(try rows.map { row in
            let (state, count) = try row.decode((String, Int64).self)
            return (state, Int(count))
        })
    }

    public func updateCommand(
        applicationId: String, commandId: String, _ change: @escaping @Sendable (CommandRecord) throws -> CommandRecord
    ) async throws -> CommandRecord? {
        try await transaction { [logger] connection in
            guard let existing = try await Self.lockedCommand(connection, applicationId: applicationId, commandId: commandId, logger: logger)
            else { return nil }
            let updated = try change(existing)
            if updated != existing { try await Self.update(connection, updated, logger: logger) }
            return updated
        }
    }

    private static func lockedCommand(
        _ connection: PostgresConnection, applicationId: String, commandId: String, logger: Logger
    ) async throws -> CommandRecord? {
        try await connection.rows("""
            SELECT \(unescaped: PostgresColumns.command) FROM commands
            WHERE application_id = \(applicationId) AND command_id = \(commandId) FOR UPDATE
            """, logger: logger).records(CommandRecord.init).first
    }

    /// Writes the command's changing columns.
    static func update(_ connection: PostgresConnection, _ c: CommandRecord, logger: Logger) async throws {
        _ = try await connection.prepared(PreparedStatements.UpdateCommand(command: c), logger: logger)
    }
}
