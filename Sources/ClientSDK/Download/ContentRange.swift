/// The range an origin says its `206` answer holds: `Content-Range: bytes first-last/complete`
/// (RFC 9110 §14.4), where `complete` may be `*`. Read strictly, because every number in it is
/// the origin's: digits only, `first ≤ last`, `last < complete`, and a length that fits in
/// Int64. Anything else is nil, which the fetcher takes as a broken answer.
struct ContentRange: Equatable, Sendable {
    var first: Int64
    var last: Int64
    /// The whole file's length; nil when the origin said `*`.
    var complete: Int64?

    /// The bytes this answer holds.
    var length: Int64 { last - first + 1 }

    init?(_ value: String) {
        guard value.hasPrefix("bytes ") else { return nil }
        let parts = value.dropFirst("bytes ".count).split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let bounds = parts[0].split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Int64(httpDecimal: bounds[0]), let last = Int64(httpDecimal: bounds[1]),
            first <= last, last < Int64.max
        else { return nil }
        var complete: Int64?
        if parts[1] != "*" {
            guard let length = Int64(httpDecimal: parts[1]), last < length else { return nil }
            complete = length
        }
        self.first = first
        self.last = last
        self.complete = complete
    }

    /// The `Range` header value asking for bytes `start` through `end` (to the end when nil).
    static func request(from start: Int64, through end: Int64?) -> String {
        "bytes=\(start)-\(end.map(String.init) ?? "")"
    }
}
