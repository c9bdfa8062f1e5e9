import Foundation
import Logging
import PostgresNIO

/// The statements on every signed request's path and on a sync's, prepared once per pooled
/// connection and then only bound and executed. Sent as plain queries, each was parsed and
/// planned anew: in a quiet sync that was most of PostgreSQL's CPU (perf: `base_yyparse`,
/// `copyObjectImpl`, `get_relation_info`, `btcostestimate` at the top), and PostgreSQL had half
/// of the machine. Statements elsewhere stay plain: they are rare, and a prepared statement
/// costs a round trip on each connection's first use.
enum PreparedStatements {
    /// A device by application and id.
    struct Device: PostgresPreparedStatement {
        // Named here: the default, `String(reflecting:)` of the type, is computed on every call.
        static let name = "backplane_device"
        static let sql = "SELECT \(PostgresColumns.device) FROM devices WHERE application_id = $1 AND device_id = $2"
        let applicationId: String
        let deviceId: String

        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 2)
            bindings.append(applicationId)
            bindings.append(deviceId)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> DeviceRecord { try DeviceRecord(StoredRow(row)) }
    }
}

extension PreparedStatements {
    /// Spends nonces in one statement: a group of signed requests' (`CallGroups`), or one in the
    /// transaction of its write (`PostgresStore.record`). Answers the floor in force, then a row
    /// per nonce spent now (`answer`). The inputs' `(keyId, nonce)` pairs are distinct.
    struct SpendNonces: PostgresPreparedStatement {
        static let name = "backplane_spend_nonces"
        static let sql = """
            WITH lease AS (SELECT accepts_before FROM nonce_lease WHERE id = 1),
            spent AS (
                INSERT INTO nonces (key_id, nonce, expires_at)
                SELECT i.key_id, i.nonce, i.expires_at
                FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::bigint[]) AS i(key_id, nonce, expires_at, signed_at)
                WHERE NOT EXISTS (SELECT 1 FROM lease WHERE accepts_before > i.signed_at)
                ON CONFLICT DO NOTHING RETURNING key_id, nonce)
            SELECT (SELECT accepts_before FROM lease), NULL::text, NULL::text
            UNION ALL SELECT NULL, key_id, nonce FROM spent
            """
        let requests: [SignedRequestRecord]

        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 4)
            bindings.append(requests.map(\.keyId))
            bindings.append(requests.map(\.nonce))
            bindings.append(requests.map(\.expiresAt))
            bindings.append(requests.map { SpentNonces.seconds($0.signedAt) })
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> (floor: Int64?, keyId: String?, nonce: String?) {
            try row.decode((Int64?, String?, String?).self)
        }

        /// The floor in force (signed timestamps before it are refused) and the nonces spent now.
        static func answer(_ rows: [Row]) -> (floor: Int64?, spent: Set<NonceKey>) {
            var floor: Int64?
            var spent = Set<NonceKey>()
            for row in rows {
                if let keyId = row.keyId, let nonce = row.nonce { spent.insert(NonceKey(keyId: keyId, nonce: nonce)) } else { floor = row.floor }
            }
            return (floor, spent)
        }

        /// Whether `request`'s nonce was spent now, by an answer with `floor` in force: a
        /// timestamp signed before the floor is refused (`SignedBeforeRestartError`), as the
        /// SQLite server whose lease the floor carries would have refused it after a restart.
        static func spentNow(_ request: SignedRequestRecord, floor: Int64?, spent: Bool) throws -> Bool {
            if let floor, floor > SpentNonces.seconds(request.signedAt) {
                throw SignedBeforeRestartError(notBefore: floor, serverTime: request.receivedAt)
            }
            return spent
        }
    }

    /// Devices with their pending and delivered commands, for a group of sign-ins (`CallGroups`):
    /// a row per open command, or one with the command's columns NULL, each row numbered by its
    /// input (`position`, from 1). The device's columns keep their names; the command's are
    /// `c_`-prefixed (`StoredRow(row, prefix:)`).
    struct DevicesWithOpenCommands: PostgresPreparedStatement {
        static let name = "backplane_devices_with_open_commands"
        static let sql = """
            SELECT k.position, \(PostgresColumns.qualified(PostgresColumns.device, by: "d")),
                \(PostgresColumns.qualified(PostgresColumns.command, by: "c", prefix: "c_"))
            FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(application_id, device_id, position)
            JOIN devices d ON d.application_id = k.application_id AND d.device_id = k.device_id
            LEFT JOIN commands c
                ON c.application_id = d.application_id AND c.device_id = d.device_id AND c.state IN ('pending', 'delivered')
            ORDER BY k.position, c.row_id
            """
        let devices: [DeviceKey]

        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 2)
            bindings.append(devices.map(\.applicationId))
            bindings.append(devices.map(\.deviceId))
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> (position: Int, device: DeviceRecord, command: CommandRecord?) {
            let columns = row.makeRandomAccess()
            let stored = StoredRow(columns)
            let commandColumns = StoredRow(columns, prefix: "c_")
            return (
                Int(try stored("position", as: Int64.self)), try DeviceRecord(stored),
                try commandColumns("row_id", as: Int64?.self) == nil ? nil : try CommandRecord(commandColumns))
        }
    }
}

/// The statements of a sync that writes (`PostgresStore+Sync.swift`), after the sign-in read:
/// an acknowledging sync ran nine statements, six of them parsed and planned anew each time, and
/// PostgreSQL had half of the CPU at 525 acknowledging syncs a second.
extension PreparedStatements {
    /// A transaction-scoped advisory lock (`PostgresConnection.lock`).
    struct AdvisoryLock: PostgresPreparedStatement {
        static let name = "backplane_advisory_lock"
        static let sql = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"
        let key: String

        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            bindings.append(key)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws {}
    }

    /// The commands a sync acknowledges (by id, in the application) and the device's open ones,
    /// locked in one statement, in one order (`row_id`). Locked rows are read again after any
    /// wait: a command finished meanwhile by another node is read finished.
    struct LockedCommands: PostgresPreparedStatement {
        static let name = "backplane_locked_commands"
        static let sql = """
            SELECT \(PostgresColumns.command) FROM commands
            WHERE application_id = $1
              AND (command_id = ANY($2::text[]) OR (device_id = $3 AND state IN ('pending', 'delivered')))
            ORDER BY row_id FOR UPDATE
            """
        let applicationId: String
        let commandIds: [String]
        let deviceId: String

        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 3)
            bindings.append(applicationId)
            bindings.append(commandIds)
            bindings.append(deviceId)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> CommandRecord { try CommandRecord(StoredRow(row)) }
    }

    /// Writes a command's changing columns.
    struct UpdateCommand: PostgresPreparedStatement {
        static let name = "backplane_update_command"
        static let sql = """
            UPDATE commands SET
                state = $1, updated_at = $2, expires_at = $3, delivered_at = $4, completed_at = $5, failure_reason = $6, deferrals = $7::bigint,
                asset_ids = $8
            WHERE application_id = $9 AND command_id = $10
            """
        let command: CommandRecord

        // `$7::bigint`: a Swift Int is bound as bigint, stored in an integer column.
        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 10)
            bindings.append(command.state.rawValue)
            bindings.append(command.updatedAt)
            bindings.append(command.expiresAt)
            bindings.append(command.deliveredAt)
            bindings.append(command.completedAt)
            bindings.append(command.failureReason)
            bindings.append(command.deferrals)
            bindings.append(command.assetIds)
            bindings.append(command.applicationId)
            bindings.append(command.commandId)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws {}
    }

    /// Ends a device's grants that hold a download (of `$4`'s assets, or all when it is NULL) as
    /// `released` (`PostgresStore.releaseGrants`).
    struct ReleaseGrants: PostgresPreparedStatement {
        static let name = "backplane_release_grants"
        static let sql = """
            UPDATE download_grants SET state = 'released', updated_at = $3
            WHERE application_id = $1 AND device_id = $2 AND state = ANY($5::text[])
              AND ($4::text[] IS NULL OR asset_id = ANY($4::text[]))
            """
        let applicationId: String
        let deviceId: String
        let at: Date
        let assetIds: [String]?
        let holdingStates: [String]

        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 5)
            bindings.append(applicationId)
            bindings.append(deviceId)
            bindings.append(at)
            bindings.append(assetIds)
            bindings.append(holdingStates)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws {}
    }
}

/// A nonce as spent: per app key. Ordered byte by byte for ASCII (both are checked at sign-in),
/// as `COLLATE "C"` orders them.
struct NonceKey: Hashable, Comparable {
    var keyId: String
    var nonce: String

    init(keyId: String, nonce: String) {
        self.keyId = keyId
        self.nonce = nonce
    }

    init(_ request: SignedRequestRecord) {
        self.init(keyId: request.keyId, nonce: request.nonce)
    }

    static func < (a: NonceKey, b: NonceKey) -> Bool { (a.keyId, a.nonce) < (b.keyId, b.nonce) }
}

/// A device by application and id: one input of a grouped sign-in read.
struct DeviceKey: Sendable, Hashable {
    var applicationId: String
    var deviceId: String
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
