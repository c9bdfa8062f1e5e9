import Foundation
import GRDB
import BackplaneWire

/// What the device did with each command, kept until the backplane confirms the acknowledgement.
extension SDKDatabase {
    struct Outcome: Sendable {
        var ack: CommandAck
        var type: CommandType
    }

    func hasOutcome(commandId: String) throws -> Bool {
        try read { db in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM command_outcomes WHERE command_id = ?", arguments: [commandId]) ?? false
        }
    }

    func recordOutcome(_ outcome: Outcome) throws {
        try write { db in
            try db.execute(
                sql: "INSERT INTO command_outcomes (command_id, type, outcome, reason, executed_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT(command_id) DO NOTHING",
                arguments: [outcome.ack.commandId, outcome.type.rawValue, outcome.ack.outcome.rawValue, outcome.ack.reason, Date()])
        }
    }

    /// Outcomes the server has not confirmed yet, oldest first.
    func unacknowledgedOutcomes(limit: Int) throws -> [Outcome] {
        try read { db in
            try Row.fetchAll(
                db, sql: "SELECT command_id, type, outcome, reason FROM command_outcomes WHERE acked_at IS NULL ORDER BY executed_at LIMIT ?",
                arguments: [limit]
            ).compactMap { row in
                // Any type: an outcome of one this SDK does not know ("unsupported") is acknowledged too.
                let type = CommandType(rawValue: try row.decode(forColumn: "type"))
                guard let outcome = CommandAck.Outcome.known(try row.decode(forColumn: "outcome"))
                else { return nil }
                return try Outcome(ack: CommandAck(commandId: row.decode(forColumn: "command_id"), outcome: outcome, reason: row.decode(forColumn: "reason")), type: type)
            }
        }
    }

    func markAcknowledged(_ commandIds: [String]) throws {
        guard !commandIds.isEmpty else { return }
        try write { db in
            for id in commandIds {
                try db.execute(sql: "UPDATE command_outcomes SET acked_at = ? WHERE command_id = ? AND acked_at IS NULL", arguments: [Date(), id])
            }
        }
    }
}
