import Foundation

/// An attribute list (RFC 8216 §4.2): `NAME=value` pairs separated by commas, where a value is
/// a quoted string (which may hold commas), or an unquoted token.
struct HLSAttributes: Sendable {
    private var values: [String: String] = [:]

    init(_ line: Substring, after tag: String) throws(HLSPlaylistError) {
        var rest = line.dropFirst(tag.count)
        while !rest.isEmpty {
            guard let equals = rest.firstIndex(of: "=") else { throw .malformed(line: line, "an attribute without a value") }
            let name = rest[..<equals].trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty, name.allSatisfy({ $0.isUppercase || $0.isNumber || $0 == "-" }) else {
                throw .malformed(line: line, "an attribute name that is not A-Z, 0-9 and -")
            }
            rest = rest[rest.index(after: equals)...]
            let value: Substring
            if rest.first == "\"" {
                let opened = rest.index(after: rest.startIndex)
                guard let closing = rest[opened...].firstIndex(of: "\"") else {
                    throw .malformed(line: line, "a quoted attribute value that is not closed")
                }
                value = rest[opened..<closing]
                rest = rest[rest.index(after: closing)...]
            } else {
                let end = rest.firstIndex(of: ",") ?? rest.endIndex
                value = rest[..<end]
                rest = rest[end...]
            }
            values[name] = String(value).trimmingCharacters(in: .whitespaces)
            if rest.first == "," {
                rest = rest.dropFirst()
            } else if !rest.isEmpty {
                throw .malformed(line: line, "attributes not separated by commas")
            }
        }
    }

    func string(_ name: String) -> String? { values[name] }

    func integer(_ name: String, line: Substring) throws(HLSPlaylistError) -> Int? {
        guard let value = values[name] else { return nil }
        guard let number = Int(decimalInteger: value) else { throw .malformed(line: line, "\(name) is not a non-negative integer") }
        return number
    }
}
