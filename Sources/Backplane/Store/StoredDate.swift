import Foundation
import GRDB

/// A date as GRDB stores it, "yyyy-MM-dd HH:mm:ss.SSS" in UTC, written without a
/// `DateFormatter`. GRDB formats every `Date` through one shared formatter, which goes through
/// ICU: a profile of acknowledging syncs showed it as a tenth of the writer's time, which no
/// other write can share. The text is the same, byte for byte (`StoredDateTests` compares the
/// two), so what GRDB wrote before and the store's SQL comparisons of dates are unchanged.
struct StoredDate: DatabaseValueConvertible {
    let date: Date

    init(_ date: Date) { self.date = date }

    var databaseValue: DatabaseValue {
        // Gregorian four-digit years only (the wire accepts no others); GRDB's own formatting
        // beyond (ICU's calendar is Julian before 1582).
        guard Self.gregorianFourDigitYears.contains(date) else { return date.databaseValue }
        return Self.text(date).databaseValue
    }

    /// 1583-01-01 ..< 10000-01-01.
    private static let gregorianFourDigitYears = Date(timeIntervalSince1970: -12_212_553_600)..<Date(timeIntervalSince1970: 253_402_300_800)

    static func fromDatabaseValue(_ dbValue: DatabaseValue) -> StoredDate? {
        Date.fromDatabaseValue(dbValue).map(StoredDate.init)
    }

    /// As Foundation and ICU format it: the instant in milliseconds plus a half, computed as
    /// Foundation does and rounded down by ICU (so to the nearest millisecond), then the
    /// Gregorian calendar.
    static func text(_ date: Date) -> String {
        let milliseconds = Int64(((date.timeIntervalSinceReferenceDate + Date.timeIntervalBetween1970AndReferenceDate) * 1_000 + 0.5).rounded(.down))
        let (days, millisecondOfDay) = floorDivision(milliseconds, 86_400_000)
        let (year, month, day) = civilDate(daysSince1970: days)
        let second = millisecondOfDay / 1_000
        var text = [UInt8]()
        text.reserveCapacity(23)
        func digits(_ value: Int64, _ count: Int) {
            var divisor: Int64 = 1
            for _ in 1..<count { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                text.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(year, 4)
        text.append(UInt8(ascii: "-"))
        digits(month, 2)
        text.append(UInt8(ascii: "-"))
        digits(day, 2)
        text.append(UInt8(ascii: " "))
        digits(second / 3_600, 2)
        text.append(UInt8(ascii: ":"))
        digits(second / 60 % 60, 2)
        text.append(UInt8(ascii: ":"))
        digits(second % 60, 2)
        text.append(UInt8(ascii: "."))
        digits(millisecondOfDay % 1_000, 3)
        return String(decoding: text, as: UTF8.self)
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        let quotient = value >= 0 ? value / divisor : (value - divisor + 1) / divisor
        return (quotient, value - quotient * divisor)
    }

    /// Howard Hinnant's days-to-civil algorithm (public domain): the Gregorian date of a day
    /// counted from 1970-01-01.
    private static func civilDate(daysSince1970 days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

extension Optional where Wrapped == Date {
    /// The stored form of an optional date (`StoredDate`), NULL for nil.
    var stored: StoredDate? { map(StoredDate.init) }
}

extension Date {
    var stored: StoredDate { StoredDate(self) }
}
