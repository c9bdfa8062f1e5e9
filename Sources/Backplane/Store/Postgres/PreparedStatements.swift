import Foundation
import Logging
import PostgresNIO

/// The statements on every signed request's path, prepared once per pooled connection and then
/// only bound and executed. Sent as plain queries, each was parsed and planned anew: in a quiet
/// sync (two reads and a nonce) that was most of PostgreSQL's CPU (perf: `base_yyparse`,
/// `copyObjectImpl`, `get_relation_info`, `btcostestimate` at the top), and PostgreSQL had half
/// of the machine. Statements elsewhere stay plain: they are rare, and a prepared statement
/// costs a round trip on each connection's first use.
enum PreparedStatements {
    /// A device by application and id.
    struct Device: OneDeviceStatement {
        // Named here: the default, `String(reflecting:)` of the type, is computed on every call.
        static let name = "backplane_device"
        static let sql = "SELECT \(PostgresColumns.device) FROM devices WHERE application_id = $1 AND device_id = $2"
        let applicationId: String
        let deviceId: String

        func decodeRow(_ row: PostgresRow) throws -> DeviceRecord { try DeviceRecord(StoredRow(row)) }
    }

    /// A device's pending and delivered commands in delivery order, without locking them.
    struct OpenCommands: OneDeviceStatement {
        static let name = "backplane_open_commands"
        static let sql = """
            SELECT \(PostgresColumns.command) FROM commands
            WHERE application_id = $1 AND device_id = $2 AND state IN ('pending', 'delivered') ORDER BY row_id
            """
        let applicationId: String
        let deviceId: String

        func decodeRow(_ row: PostgresRow) throws -> CommandRecord { try CommandRecord(StoredRow(row)) }
    }

    /// Spends a nonce (`PostgresStore.record`): the floors in force, and whether it was spent now.
    struct SpendNonce: PostgresPreparedStatement {
        static let name = "backplane_spend_nonce"
        static let sql = """
            WITH lease AS (SELECT accepts_before FROM nonce_lease WHERE id = 1),
            spent AS (
                INSERT INTO nonces (key_id, nonce, expires_at)
                SELECT $1, $2, $3
                WHERE NOT EXISTS (SELECT 1 FROM lease WHERE accepts_before > $4)
                ON CONFLICT DO NOTHING RETURNING 1)
            SELECT (SELECT accepts_before FROM lease), EXISTS (SELECT 1 FROM spent)
            """
        let keyId: String
        let nonce: String
        let expiresAt: Date
        let signedAt: Int64

        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 4)
            bindings.append(keyId)
            bindings.append(nonce)
            bindings.append(expiresAt)
            bindings.append(signedAt)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> (floor: Int64?, spent: Bool) { try row.decode((Int64?, Bool).self) }
    }
}

/// A statement about one device: `$1` its application, `$2` its id.
protocol OneDeviceStatement: PostgresPreparedStatement {
    var applicationId: String { get }
    var deviceId: String { get }
}

extension OneDeviceStatement {
    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(applicationId)
        bindings.append(deviceId)
        return bindings
    }
}

extension PostgresConnection {
    /// The rows of a prepared statement, unless the connection has closed (as `statement`).
    func prepared<Statement: PostgresPreparedStatement>(_ statement: Statement, logger: Logger) async throws -> [Statement.Row] {
        guard !isClosed else { throw StoreUnavailableError("the database connection closed") }
        var rows: [Statement.Row] = []
        for try await row in try await execute(statement, logger: logger) { rows.append(row) }
        return rows
    }
}
