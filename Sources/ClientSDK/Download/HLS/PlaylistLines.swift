/// The non-empty lines of a playlist, trimmed of white space, as slices of its text. Lines end
/// at LF or CR (RFC 8216 §4.1: LF or CRLF), found in the UTF-8 bytes.
struct PlaylistLines: Sequence, IteratorProtocol {
    private var rest: Substring

    init(_ text: String) { rest = text[...] }

    mutating func next() -> Substring? {
        while !rest.isEmpty {
            let end = rest.utf8.firstIndex { $0 == 0x0A || $0 == 0x0D } ?? rest.endIndex
            let line = rest[..<end]
            rest = end == rest.endIndex ? rest[end...] : rest[rest.utf8.index(after: end)...]
            let trimmed = line.drop(while: \.isWhitespace)
            if let last = trimmed.lastIndex(where: { !$0.isWhitespace }) { return trimmed[...last] }
        }
        return nil
    }
}
