import Foundation

/// Dates as text in UTC, written by hand for the hot paths, each the same bytes as the
/// formatter it replaces (tests compare them over random instants): `StoredDate` for what GRDB
/// stores, the sync answer for what `WireJSON.encoder()` writes. Foundation's formatters go
/// through ICU or a format style per call, which profiles showed on both paths.
enum UTCDateText {
    /// "yyyy-MM-dd HH:mm:ss.SSS", as GRDB's `DateFormatter` writes it: Foundation adds half a
    /// millisecond and ICU rounds down, so to the nearest millisecond. For years 1583 to 9999
    /// (ICU's calendar is Julian before that; `StoredDate` checks).
    static func stored(_ date: Date) -> String {
        let milliseconds = Int64(((date.timeIntervalSinceReferenceDate + Date.timeIntervalBetween1970AndReferenceDate) * 1_000 + 0.5).rounded(.down))
        var text = Text()
        text.bytes.reserveCapacity(23)
        text.dateAndTime(milliseconds: milliseconds, separator: " ")
        text.append(".")
        text.digits(floorDivision(milliseconds, 1_000).remainder, 3)
        return text.string
    }

    /// Adds "yyyy-MM-ddTHH:mm:ssZ" to `bytes`, as `Date.ISO8601FormatStyle()` (and so
    /// `WireJSON.encoder()`) writes it: whole seconds, rounded down. For years 1583 to 9999 (the
    /// wire accepts no others).
    static func appendISO8601(_ date: Date, to bytes: inout [UInt8]) {
        let seconds = (date.timeIntervalSinceReferenceDate + Date.timeIntervalBetween1970AndReferenceDate).rounded(.down)
        var text = Text()
        swap(&text.bytes, &bytes)  // writes into `bytes` itself, without a copy
        text.dateAndTime(milliseconds: Int64(seconds) * 1_000, separator: "T")
        text.append("Z")
        swap(&text.bytes, &bytes)
    }

    /// The instant a `stored` text names, as GRDB's parser would give it: computed in the order
    /// Foundation's Gregorian calendar computes it (the time of day with its fraction as one
    /// `Double`, then the day's start in seconds since 2001 added), so it is the same `Double`,
    /// last bit included, where the sum is finer than a second near 2001 (`UTCDateTextTests`).
    /// Nil for any other text, a date that does not exist (February 30) or a year before 1583:
    /// the caller leaves those to GRDB. GRDB's parse goes through `Calendar`, for each date of
    /// the device read every sync makes.
    static func date(stored text: String) -> Date? {
        var text = text
        return text.withUTF8(date(storedUTF8:))
    }

    /// `date(stored:)` of text as UTF-8 bytes (a column SQLite holds).
    static func date(storedUTF8 bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        guard bytes.count == 23, bytes[4] == dash, bytes[7] == dash, bytes[10] == space, bytes[13] == colon,
              bytes[16] == colon, bytes[19] == dot,
              let year = number(bytes, 0, 4), let month = number(bytes, 5, 2), let day = number(bytes, 8, 2),
              let hour = number(bytes, 11, 2), let minute = number(bytes, 14, 2), let second = number(bytes, 17, 2),
              let millisecond = number(bytes, 20, 3),
              year >= 1583, (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
              hour < 24, minute < 60, second < 60
        else { return nil }
        let daysSince2001 = daysSince1970(year: year, month: month, day: day) - 11_323
        let timeOfDay = Double(hour * 3_600 + minute * 60 + second) + Double(millisecond) / 1_000
        return Date(timeIntervalSinceReferenceDate: Double(daysSince2001 * 86_400) + timeOfDay)
    }

    private static let dash = UInt8(ascii: "-"), space = UInt8(ascii: " "), colon = UInt8(ascii: ":"), dot = UInt8(ascii: ".")

    /// The decimal number of `count` digits at `start`, or nil if one is not a digit.
    private static func number(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ count: Int) -> Int64? {
        var value: Int64 = 0
        for byte in bytes[start..<start + count] {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        return value
    }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Howard Hinnant's days-from-civil algorithm (public domain), the inverse of `civilDate`.
    private static func daysSince1970(year: Int64, month: Int64, day: Int64) -> Int64 {
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = shiftedYear / 400  // years from 1583 on: never negative
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// Years 1583 to 9999, where both texts are as their formatters write them. It ends half a
    /// millisecond early: `stored` rounds to the millisecond, and the last half millisecond of
    /// 9999 would round into the year 10000, which has five digits.
    static let gregorianFourDigitYears = Date(timeIntervalSince1970: -12_212_553_600)..<Date(timeIntervalSince1970: 253_402_300_799.9995)

    private struct Text {
        var bytes: [UInt8] = []

        var string: String { String(decoding: bytes, as: UTF8.self) }

        mutating func append(_ character: Unicode.Scalar) { bytes.append(UInt8(ascii: character)) }

        mutating func digits(_ value: Int64, _ count: Int) {
            var divisor: Int64 = 1
            for _ in 1..<count { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }

        /// "yyyy-MM-dd", `separator`, "HH:mm:ss" of an instant in milliseconds since 1970.
        mutating func dateAndTime(milliseconds: Int64, separator: Unicode.Scalar) {
            let (days, millisecondOfDay) = floorDivision(milliseconds, 86_400_000)
            let (year, month, day) = civilDate(daysSince1970: days)
            let second = millisecondOfDay / 1_000
            digits(year, 4)
            append("-")
            digits(month, 2)
            append("-")
            digits(day, 2)
            append(separator)
            digits(second / 3_600, 2)
            append(":")
            digits(second / 60 % 60, 2)
            append(":")
            digits(second % 60, 2)
        }
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
