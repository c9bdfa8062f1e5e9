import Foundation
import GRDB
import Logging
import PostgresNIO

/// Moves an embedded backplane into PostgreSQL: every table of a SQLite store copied into an
/// empty PostgreSQL store, row ids, change numbers and cursors' positions included, so devices
/// go on syncing where they were (same credentials, no command or episode delivered again).
///
/// One PostgreSQL transaction: the copy is all there, counts checked, or nothing is. The SQLite
/// side is read in pages of 1,000 rows; its server must be stopped, or rows written meanwhile
/// may be missed.
public enum SQLiteToPostgres {
    /// Tables in an order their references allow. `WITHOUT ROWID` tables are read whole (they hold
    /// one small row per key, device or application).
    static let tables: [(name: String, hasRowId: Bool)] = [
        ("applications", true), ("app_keys", true), ("tokens", true), ("nonces", false), ("devices", true),
        ("commands", true), ("feeds", true), ("episodes", true), ("change_counters", false), ("episode_changes", true),
        ("subscriptions", true), ("events", true), ("event_floors", false), ("download_grants", true),
        ("entitlement_keys", true), ("asset_policies", true), ("nonce_lease", false),
        ("user_identities", true), ("push_credentials", true), ("device_pushes", false),
        ("user_token_uses", false), ("content_keys", false),
        ("agreement_keys", false), ("licenses", true), ("license_servers", false),
    ]

    /// Identity columns whose sequences must continue after the copied values.
    static let identities = [("devices", "row_id"), ("commands", "row_id"), ("events", "id"), ("download_grants", "row_id"),
                             ("entitlement_keys", "row_id")]

    public struct TargetNotEmpty: Error, CustomStringConvertible {
        public let table: String
        public var description: String {
            "The target database already holds data (table \(table)); copy-data only fills an empty database."
        }
    }

    public struct CountMismatch: Error, CustomStringConvertible {
        public let table: String, source: Int, target: Int
        public var description: String { "Table \(table): \(source) rows read but \(target) in the target; nothing was kept." }
    }

    /// Copies everything; returns each table's row count.
    public static func copy(from source: SQLiteStore, to target: PostgresStore) async throws -> [(table: String, rows: Int)] {
        try await target.transaction(unbounded: true) { [logger = target.logger] connection in
            for (table, _) in tables {
                if try await !connection.rows(PostgresQuery(unsafeSQL: "SELECT 1 FROM \(table) LIMIT 1"), logger: logger).isEmpty {
                    throw TargetNotEmpty(table: table)
                }
            }
            var counts: [(table: String, rows: Int)] = []
            for (table, hasRowId) in tables {
                let columns = try await connection.rows(
                    """
                    SELECT column_name, data_type FROM information_schema.columns
                    WHERE table_schema = current_schema() AND table_name = \(table) ORDER BY ordinal_position
                    """,
                    logger: logger
                ).map { try $0.decode((String, String).self) }
                var copied = 0
                var after: Int64 = .min
                while true {
                    let from = after
                    let (rows, last) = try await source.read { db in try Self.page(db, table: table, columns: columns, hasRowId: hasRowId, after: from) }
                    if !rows.isEmpty { try await connection.run(try insert(table: table, columns: columns, rows: rows), logger: logger) }
                    copied += rows.count
                    guard hasRowId, let last else { break }
                    after = last
                }
                let stored = try await connection.rows(PostgresQuery(unsafeSQL: "SELECT COUNT(*) FROM \(table)"), logger: logger)
                    .first?.decode(Int.self) ?? 0
                let read = try await source.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0 }
                guard stored == copied, stored == read else { throw CountMismatch(table: table, source: read, target: stored) }
                counts.append((table, stored))
            }
            for (table, column) in identities {
                try await connection.run(PostgresQuery(unsafeSQL: """
                    SELECT setval(pg_get_serial_sequence('\(table)', '\(column)'), COALESCE((SELECT MAX(\(column)) FROM \(table)), 0) + 1, false)
                    """), logger: logger)
            }
            // Statistics for what was copied: until autovacuum gathers them (within a minute or
            // so), the nodes' prepared statements would be planned for empty tables, and keep
            // those plans (a benchmark saw a sequential scan of every device per sign-in).
            try await connection.run(PostgresQuery(unsafeSQL: "ANALYZE " + tables.map(\.name).joined(separator: ", ")), logger: logger)
            return counts
        }
    }

    /// Up to 1,000 rows after rowid `after` (all rows for a table without rowid), each value
    /// converted to the PostgreSQL column's type; and the last rowid read.
    private static func page(
        _ db: Database, table: String, columns: [(String, String)], hasRowId: Bool, after: Int64
    ) throws -> ([[PostgresBindable]], Int64?) {
        let sqliteColumns = Set(try db.columns(in: table).map(\.name))
        // entitlement_keys orders its keys by SQLite's rowid, which PostgreSQL keeps as row_id.
        let selected = columns.map { sqliteColumns.contains($0.0) ? $0.0 : "rowid AS \($0.0)" }
        let sql = hasRowId
            ? "SELECT rowid AS _copy_rowid, \(selected.joined(separator: ", ")) FROM \(table) WHERE rowid > ? ORDER BY rowid LIMIT 1000"
            : "SELECT \(selected.joined(separator: ", ")) FROM \(table)"
        var last: Int64?
        let rows = try Row.fetchAll(db, sql: sql, arguments: hasRowId ? [after] : []).map { row in
            if hasRowId { last = row["_copy_rowid"] }
            return try columns.map { name, type in try PostgresBindable(row[name] as DatabaseValue, as: type, column: "\(table).\(name)") }
        }
        return (rows, rows.isEmpty ? nil : last)
    }

    private static func insert(table: String, columns: [(String, String)], rows: [[PostgresBindable]]) throws -> PostgresQuery {
        var binds = PostgresBindings(capacity: rows.count * columns.count)
        var tuples: [String] = []
        for row in rows {
            var placeholders: [String] = []
            for value in row {
                try value.append(to: &binds)
                placeholders.append("$\(binds.count)" + (value.isJSON ? "::jsonb" : ""))
            }
            tuples.append("(" + placeholders.joined(separator: ", ") + ")")
        }
        let names = columns.map { "\"\($0.0)\"" }.joined(separator: ", ")
        return PostgresQuery(unsafeSQL: "INSERT INTO \(table) (\(names)) OVERRIDING SYSTEM VALUE VALUES \(tuples.joined(separator: ", "))", binds: binds)
    }
}

/// One SQLite value as the PostgreSQL column wants it.
struct PostgresBindable: Sendable {
    private enum Value: Sendable {
        case null, text(String), json(String), integer(Int64), real(Double), boolean(Bool), date(Date), bytes(Data), texts([String])
    }

    private let value: Value
    var isJSON: Bool { if case .json = value { true } else { false } }

    init(_ stored: DatabaseValue, as type: String, column: String) throws {
        if stored.isNull {
            value = .null
            return
        }
        func fail() -> any Error { StoredValueError(column: column, value: "\(stored)") }
        switch type {
        case "text": guard let text = String.fromDatabaseValue(stored) else { throw fail() }; value = .text(text)
        case "jsonb": guard let text = String.fromDatabaseValue(stored) else { throw fail() }; value = .json(text)
        case "bigint", "integer": guard let number = Int64.fromDatabaseValue(stored) else { throw fail() }; value = .integer(number)
        case "double precision": guard let number = Double.fromDatabaseValue(stored) else { throw fail() }; value = .real(number)
        case "boolean": guard let flag = Bool.fromDatabaseValue(stored) else { throw fail() }; value = .boolean(flag)
        case "timestamp with time zone": guard let date = Date.fromDatabaseValue(stored) else { throw fail() }; value = .date(date)
        case "bytea": guard let data = Data.fromDatabaseValue(stored) else { throw fail() }; value = .bytes(data)
        case "ARRAY":
            // A list SQLite keeps as JSON text (a command's asset ids).
            guard let text = String.fromDatabaseValue(stored), let list = try? JSONDecoder().decode([String].self, from: Data(text.utf8))
            else { throw fail() }
            value = .texts(list)
        default: throw StoredValueError(column: column, value: "a value for a column of type \(type)")
        }
    }

    func append(to binds: inout PostgresBindings) throws {
        switch value {
        case .null: binds.appendNull()
        case .text(let text), .json(let text): binds.append(text)
        case .integer(let number): binds.append(number)
        case .real(let number): binds.append(number)
        case .boolean(let flag): binds.append(flag)
        case .date(let date): binds.append(date)
        case .bytes(let data): try binds.append(data)
        case .texts(let list): binds.append(list)
        }
    }
}
