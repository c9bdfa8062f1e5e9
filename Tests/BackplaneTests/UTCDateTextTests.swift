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
                #expect(UTCDateText.iso8601(date) == date.formatted(.iso8601), "\(date.timeIntervalSince1970)")
            }
        }
        #expect(StoredDate(Date(timeIntervalSince1970: 1_800_000_000.5)).databaseValue == "2027-01-15 08:00:00.500".databaseValue)
    }
}
