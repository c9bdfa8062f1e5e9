import Foundation

/// A request's `Range` header against a file of `size` bytes (RFC 9110 §14): what to send.
/// One range only: players ask for one at a time, and a multipart answer is refused (416) rather
/// than built. The header is the player's, so every number is checked before it is used.
enum ByteRangeRequest: Equatable {
    /// No `Range` (or one in a unit other than bytes, which a server ignores): the whole file.
    case whole
    /// Bytes `lowerBound..<upperBound` of the file (206).
    case part(Range<Int64>)
    /// Nothing can be sent for it (416, with `Content-Range: bytes */size`).
    case unsatisfiable

    init(header: String?, size: Int64) {
        guard let header = header?.trimmingCharacters(in: .whitespaces), !header.isEmpty else { self = .whole; return }
        guard header.lowercased().hasPrefix("bytes=") else { self = .whole; return }
        let spec = header.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { self = .unsatisfiable; return }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        if first.isEmpty {
            // A suffix: the last N bytes.
            guard let count = Self.number(last), count > 0, size > 0 else { self = .unsatisfiable; return }
            self = .part(max(size - count, 0)..<size)
            return
        }
        guard let start = Self.number(first), start < size else { self = .unsatisfiable; return }
        if last.isEmpty {
            self = .part(start..<size)
            return
        }
        guard let end = Self.number(last), end >= start else { self = .unsatisfiable; return }
        self = .part(start..<min(end, size - 1) + 1)
    }

    /// Decimal digits only, at most 18 of them: always an `Int64`, never negative.
    private static func number(_ text: String) -> Int64? {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return Int64(text)
    }

    /// The player's `Range` to pass on to an origin whose file's size is not known: one range of
    /// bytes (`a-b`, `a-`, `-n`), written back from its numbers; nil otherwise (the whole file is
    /// asked for, which a server may always answer).
    static func forwardable(_ header: String) -> String? {
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes=") else { return nil }
        let spec = text.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        let bounds = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard !spec.contains(","), bounds.count == 2, bounds[0].utf8.count <= 18, bounds[1].utf8.count <= 18 else { return nil }
        let first = bounds[0].trimmingCharacters(in: .whitespaces), last = bounds[1].trimmingCharacters(in: .whitespaces)
        switch (Int64(httpDecimal: first), Int64(httpDecimal: last)) {
        case let (start?, end?) where start <= end: return "bytes=\(start)-\(end)"
        case let (start?, nil) where last.isEmpty: return "bytes=\(start)-"
        case let (nil, count?) where first.isEmpty && count > 0: return "bytes=-\(count)"
        default: return nil
        }
    }
}
