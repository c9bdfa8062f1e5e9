import Foundation
import GRDB

/// A date as GRDB stores it, "yyyy-MM-dd HH:mm:ss.SSS" in UTC, written without a
/// `DateFormatter` (`UTCDateText.stored`) and read without a `Calendar`. GRDB formats every
/// `Date` through one shared formatter, which goes through ICU, on the writer thread for every
/// date a write stores: time no other write can share. The text is the same, byte for byte, and
/// so is the date read back (`UTCDateTextTests`), so what GRDB wrote before and the store's SQL
/// comparisons of dates are unchanged.
struct StoredDate: DatabaseValueConvertible {
    let date: Date

    init(_ date: Date) { self.date = date }

    var databaseValue: DatabaseValue {
        // Gregorian four-digit years only (the wire accepts no others); GRDB's own formatting
        // beyond (ICU's calendar is Julian before 1582).
        guard UTCDateText.gregorianFourDigitYears.contains(date) else { return date.databaseValue }
        return UTCDateText.stored(date).databaseValue
    }

    /// The text this type writes is parsed by hand (`UTCDateText.date(stored:)`), anything else
    /// by GRDB.
    static func fromDatabaseValue(_ dbValue: DatabaseValue) -> StoredDate? {
        if case .string(let text) = dbValue.storage, let date = UTCDateText.date(stored: text) { return StoredDate(date) }
        return Date.fromDatabaseValue(dbValue).map(StoredDate.init)
    }
}

extension Optional where Wrapped == Date {
    /// The stored form of an optional date (`StoredDate`), NULL for nil.
    var stored: StoredDate? { map(StoredDate.init) }
}

extension Date {
    var stored: StoredDate { StoredDate(self) }
}
