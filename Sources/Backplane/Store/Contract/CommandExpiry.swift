import Foundation
import BackplaneWire

/// When a command expires, the rule's one home: an open command (`pending` or `delivered`) whose
/// `expiresAt` is at or before now is `expired`, completed at its expiry. The services apply it to
/// every command they read (`applied(to:now:)`), so an answer never shows a command open past its
/// expiry; the stores apply it in SQL to what they sweep (`expireCommands`) and count
/// (`commandCounts`), with the conditions written here once for both.
public enum CommandExpiry {
    public static func applied(to command: CommandRecord, now: Date) -> CommandRecord {
        guard !command.state.isFinished, let expiresAt = command.expiresAt, expiresAt <= now else { return command }
        var command = command
        command.state = .expired
        command.completedAt = expiresAt
        command.updatedAt = now
        return command
    }

    /// SQL true for a `commands` row the rule expires at the parameter `now` (a placeholder:
    /// `?` on SQLite, `$n` on PostgreSQL).
    static func isPastExpirySQL(now: String) -> String {
        "state IN ('\(CommandState.pending.rawValue)', '\(CommandState.delivered.rawValue)') AND expires_at <= \(now)"
    }

    /// SQL of a row's state as the API shows it, the rule applied.
    static func shownStateSQL(now: String) -> String {
        "CASE WHEN \(isPastExpirySQL(now: now)) THEN '\(CommandState.expired.rawValue)' ELSE state END"
    }

    /// The SQL assignments that expire a row (the state, and its completion at its expiry); the
    /// caller sets `updated_at`.
    static let expireSQL = "state = '\(CommandState.expired.rawValue)', completed_at = expires_at"
}
