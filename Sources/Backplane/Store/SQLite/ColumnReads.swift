import Foundation
import GRDB
import GRDBSQLite

/// A result row's values by position: a GRDB `Row`, or the statement a `ColumnCursor` steps.
/// Records read by position (`DeviceRecord`, `CommandRecord`) decode from either, so each has
/// one list of its columns.
protocol ColumnValues {
    /// The value at `index` (0 for the leftmost column); nil only for an optional `Value`.
    func value<Value: DatabaseValueConvertible>(_ index: Int) throws -> Value
    /// As `value`, for the kinds a device or command row holds most of: a statement reads them
    /// straight from SQLite (`StatementColumns`), without a `DatabaseValue` and GRDB's generic
    /// conversions, which showed in profiles of the device read every sync makes.
    func text(_ index: Int) throws -> String
    func optionalText(_ index: Int) throws -> String?
    /// A date the store wrote (`StoredDate`: parsed by hand in the form it writes).
    func date(_ index: Int) throws -> Date
    func optionalDate(_ index: Int) throws -> Date?
}

extension ColumnValues {
    func text(_ index: Int) throws -> String { try value(index) }
    func optionalText(_ index: Int) throws -> String? { try value(index) }
    func date(_ index: Int) throws -> Date { try (value(index) as StoredDate).date }
    func optionalDate(_ index: Int) throws -> Date? { try (value(index) as StoredDate?)?.date }
}

extension Row: ColumnValues {
    func value<Value: DatabaseValueConvertible>(_ index: Int) throws -> Value {
        try decode(Value.self, atIndex: index)
    }
}

/// A row's columns from `offset` on: the second of two records a statement selects side by side.
struct ShiftedColumns<Base: ColumnValues>: ColumnValues {
    let base: Base
    let offset: Int

    func value<Value: DatabaseValueConvertible>(_ index: Int) throws -> Value { try base.value(offset + index) }
    func text(_ index: Int) throws -> String { try base.text(offset + index) }
    func optionalText(_ index: Int) throws -> String? { try base.optionalText(offset + index) }
    func date(_ index: Int) throws -> Date { try base.date(offset + index) }
    func optionalDate(_ index: Int) throws -> Date? { try base.optionalDate(offset + index) }
}

/// The current row of a stepping SQLite statement.
struct StatementColumns: ColumnValues {
    let statement: SQLiteStatement

    func value<Value: DatabaseValueConvertible>(_ index: Int) throws -> Value {
        let stored = DatabaseValue(sqliteStatement: statement, index: CInt(index))
        guard let value = Value.fromDatabaseValue(stored) else {
            let column = String(cString: sqlite3_column_name(statement, CInt(index)))
            throw DecodingError.dataCorrupted(.init(
                codingPath: [], debugDescription: "Column '\(column)' holds \(stored), which is not a \(Value.self)."))
        }
        return value
    }

    // TEXT, and NULL for the optionals, read here; any other storage goes through `value`, as
    // GRDB would convert it (or refuse it).

    func text(_ index: Int) throws -> String {
        guard sqlite3_column_type(statement, CInt(index)) == SQLITE_TEXT else { return try value(index) }
        return String(cString: sqlite3_column_text(statement, CInt(index)))  // as `DatabaseValue` reads it
    }

    func optionalText(_ index: Int) throws -> String? {
        switch sqlite3_column_type(statement, CInt(index)) {
        case SQLITE_NULL: nil
        case SQLITE_TEXT: String(cString: sqlite3_column_text(statement, CInt(index)))
        default: try value(index)
        }
    }

    func date(_ index: Int) throws -> Date {
        try storedText(index).flatMap(UTCDateText.date(storedUTF8:)) ?? (value(index) as StoredDate).date
    }

    func optionalDate(_ index: Int) throws -> Date? {
        if sqlite3_column_type(statement, CInt(index)) == SQLITE_NULL { return nil }
        return try date(index)
    }

    /// The column's text as SQLite holds it, valid until the statement steps; nil if not TEXT.
    private func storedText(_ index: Int) -> UnsafeBufferPointer<UInt8>? {
        guard sqlite3_column_type(statement, CInt(index)) == SQLITE_TEXT, let text = sqlite3_column_text(statement, CInt(index)) else { return nil }
        return UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(statement, CInt(index))))
    }
}

/// Rows of a statement decoded straight from SQLite by position, for the reads every request
/// makes. GRDB's record cursors build a dictionary of the statement's lower-cased column names
/// for each fetch, to look columns up by name: work on the device read every sync makes, for a
/// read that looks nothing up by name.
final class ColumnCursor<Element>: DatabaseCursor {
    var _isDone = false
    let _statement: Statement
    private let element: (StatementColumns) throws -> Element

    init(_ statement: Statement, arguments: StatementArguments, element: @escaping (StatementColumns) throws -> Element) throws {
        try statement.setArguments(arguments)  // resets the statement and binds
        _statement = statement
        self.element = element
    }

    /// As GRDB's cursors do: a statement left mid-result would hold its read snapshot open.
    deinit { sqlite3_reset(_statement.sqliteStatement) }

    func _element(sqliteStatement: SQLiteStatement) throws -> Element {
        try element(StatementColumns(statement: sqliteStatement))
    }
}
