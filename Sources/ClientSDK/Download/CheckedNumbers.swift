/// Arithmetic on numbers that come from outside the SDK (a playlist, an origin's headers, the
/// SDK database): Swift traps on overflow, and a trap in the SDK is a crash of the app, so every
/// such sum and conversion goes through one of these instead.
extension Int64 {
    /// `value` as a whole number, or nil when it is not finite, is negative or does not fit.
    init?(nonNegative value: Double) {
        // Double(Int64.max) rounds up to 2^63, which no Int64 holds: hence `<`.
        guard value.isFinite, value >= 0, value < Double(Int64.max) else { return nil }
        self.init(value)
    }

    /// `self + other`, held at the bounds instead of overflowing.
    func addingClamped(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }

    /// `self - other`, held at the bounds instead of overflowing.
    func subtractingClamped(_ other: Int64) -> Int64 {
        let (difference, overflow) = subtractingReportingOverflow(other)
        return overflow ? (other < 0 ? .max : .min) : difference
    }

    /// `self * other`, held at the bounds instead of overflowing.
    func multipliedClamped(by other: Int64) -> Int64 {
        let (product, overflow) = multipliedReportingOverflow(by: other)
        return overflow ? ((self < 0) == (other < 0) ? .max : .min) : product
    }

    /// A decimal number of ASCII digits only, as HTTP writes lengths and positions: no sign, no
    /// spaces (`Int64(_:)` takes a leading `+` or `-`), and nil past `Int64.max`.
    init?(httpDecimal text: some StringProtocol) {
        guard !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = Int64(text) else { return nil }
        self = value
    }
}

extension Int {
    /// A decimal-integer as RFC 8216 §4.2 writes one: ASCII digits only (no sign, no spaces), nil
    /// when it does not fit.
    init?(decimalInteger text: some StringProtocol) {
        guard let value = Int64(httpDecimal: text), let fits = Int(exactly: value) else { return nil }
        self = fits
    }

    /// `self + other`, held at the bounds instead of overflowing.
    func addingClamped(_ other: Int) -> Int {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }
}
