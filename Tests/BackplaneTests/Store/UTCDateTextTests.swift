@testable import Backplane
import BackplaneWire
import Foundation
import GRDB
import Testing

/// Dates written by hand (`UTCDateText`) must be the same bytes as the formatters they replace:
/// for the store, or comparisons with dates GRDB wrote would change; for the sync answer, or it
/// would differ from every other answer's dates.
struct UTCDateTextTests {
    @Test func datesWrittenByHandAreTheFormattersBytes() {
        var generator = SystemRandomNumberGenerator()
        var dates = [
            Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: -0.0005), Date(timeIntervalSince1970: 0.9995),
            Date(timeIntervalSince1970: 951_782_400.999), Date(timeIntervalSince1970: 1_800_000_000.123_456),
            Date(timeIntervalSince1970: 4_102_444_799.9999), WireLimits.acceptedDates.lowerBound, WireLimits.acceptedDates.upperBound,
            Date(timeIntervalSince1970: -62_135_596_800), Date(timeIntervalSince1970: -12_212_553_600), Date(timeIntervalSince1970: 253_402_300_799.999),
            Date(timeIntervalSince1970: 253_402_300_799.9997),  // rounds into the year 10000
        ]
        // Any instant the wire accepts, at microsecond and at whole-millisecond precision.
        let range = WireLimits.acceptedDates.lowerBound.timeIntervalSince1970...WireLimits.acceptedDates.upperBound.timeIntervalSince1970
        for _ in 0..<20_000 {
            let seconds = Double.random(in: range, using: &generator)
            dates.append(Date(timeIntervalSince1970: seconds))
            dates.append(Date(timeIntervalSince1970: (seconds * 1_000).rounded() / 1_000))
        }
        for date in dates {
            #expect(StoredDate(date).databaseValue == date.databaseValue, "\(date.timeIntervalSince1970)")
            if UTCDateText.gregorianFourDigitYears.contains(date) {
                var iso8601: [UInt8] = []
                UTCDateText.appendISO8601(date, to: &iso8601)
                #expect(String(decoding: iso8601, as: UTF8.self) == date.formatted(.iso8601), "\(date.timeIntervalSince1970)")
            }
        }
        #expect(StoredDate(Date(timeIntervalSince1970: 1_800_000_000.5)).databaseValue == "2027-01-15 08:00:00.500".databaseValue)
    }

    /// Read back, the hand parse must give GRDB's `Date` to the bit: records compare equal, and
    /// a date read and written again must not move.
    @Test func storedDatesReadBackAsGRDBReadsThem() throws {
        var generator = SystemRandomNumberGenerator()
        var texts = [
            "2000-02-29 23:59:59.999", "1583-01-01 00:00:00.000", "9999-12-31 23:59:59.999", "1970-01-01 00:00:00.000",
            // Near 2001, where the sum is finer than a second and the order of the additions shows.
            "2000-12-31 23:59:59.123", "2001-01-02 01:00:00.007", "2001-01-01 00:00:00.001",
        ]
        let range = UTCDateText.gregorianFourDigitYears.lowerBound.timeIntervalSince1970..<UTCDateText.gregorianFourDigitYears.upperBound.timeIntervalSince1970
        let around2001 = 978_307_200 - 90 * 86_400.0..<978_307_200 + 90 * 86_400.0
        for _ in 0..<10_000 {
            texts.append(UTCDateText.stored(Date(timeIntervalSince1970: Double.random(in: range, using: &generator))))
            texts.append(UTCDateText.stored(Date(timeIntervalSince1970: Double.random(in: around2001, using: &generator))))
        }
        for text in texts {
            let byHand = try #require(StoredDate.fromDatabaseValue(text.databaseValue)?.date, "\(text)")
            let byGRDB = try #require(Date.fromDatabaseValue(text.databaseValue))
            #expect(UTCDateText.date(stored: text) != nil, "\(text) was left to GRDB")
            #expect(byHand.timeIntervalSinceReferenceDate.bitPattern == byGRDB.timeIntervalSinceReferenceDate.bitPattern, "\(text)")
        }
    }

    /// Any other text is left to GRDB: its other forms still read, and what does not exist is
    /// not made up by hand.
    @Test func otherDateTextsAreLeftToGRDB() {
        for text in ["2024-02-30 00:00:00.000", "2023-02-29 12:00:00.000", "2024-13-01 00:00:00.000", "2024-01-01 24:00:00.000",
                     "2024-01-01 00:60:00.000", "1582-10-15 00:00:00.000", "2024-01-01T00:00:00.000", "2024-01-01 00:00:00",
                     "2024-01-01 00:00:00.0000", "2024-01-01 00:00:0a.000", "+024-01-01 00:00:00.000", "2024-01-01"] {
            #expect(UTCDateText.date(stored: text) == nil, "\(text)")
        }
        // And what GRDB reads of them is still read.
        #expect(StoredDate.fromDatabaseValue("2024-01-01T12:00:00.000".databaseValue)?.date == Date(timeIntervalSince1970: 1_704_110_400))
        #expect(StoredDate.fromDatabaseValue("2024-01-01".databaseValue)?.date == Date(timeIntervalSince1970: 1_704_067_200))
        #expect(StoredDate.fromDatabaseValue(1_800_000_000.databaseValue)?.date == Date(timeIntervalSince1970: 1_800_000_000))
        #expect(StoredDate.fromDatabaseValue(DatabaseValue.null) == nil)
    }
}
