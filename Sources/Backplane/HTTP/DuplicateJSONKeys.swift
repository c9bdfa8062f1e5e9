import Foundation

/// Finds a key that appears twice in one JSON object. Foundation's decoder keeps one of the two
/// silently, so `{"userId": "alice", …, "userId": "mallory"}` would mean whatever the parser
/// picked; the backplane refuses such a body instead (400), as RFC 8259 §4 allows.
///
/// One pass over the bytes, no allocation for keys without escapes beyond the key bytes
/// themselves. Input that is not JSON is left to the decoder, which says what is wrong with it:
/// this only answers "a duplicate key" or nil, and never reads outside the buffer.
enum DuplicateJSONKeys {
    private enum Frame {
        case object(keys: Set<[UInt8]>, expectingKey: Bool)
        case array
    }

    /// The first duplicated key (unescaped), or nil.
    static func first(in bytes: UnsafeRawBufferPointer) -> String? {
        var stack: [Frame] = []
        var index = 0
        let count = bytes.count
        while index < count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "{"):
                stack.append(.object(keys: [], expectingKey: true))
            case UInt8(ascii: "["):
                stack.append(.array)
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if !stack.isEmpty { stack.removeLast() }
            case UInt8(ascii: ","):
                if case .object(let keys, _) = stack.last {
                    stack[stack.count - 1] = .object(keys: keys, expectingKey: true)
                }
            case UInt8(ascii: "\""):
                let start = index + 1
                var end = start
                var escaped = false
                while end < count, bytes[end] != UInt8(ascii: "\"") {
                    if bytes[end] == UInt8(ascii: "\\") {
                        escaped = true
                        end += 1
                    }
                    end += 1
                }
                if case .object(var keys, true) = stack.last {
                    let raw = Array(bytes[start..<min(end, count)])
                    let key = escaped ? unescaped(raw) : raw
                    // Take the set out of the stack while inserting, so it is not copied.
                    stack[stack.count - 1] = .array
                    let (inserted, _) = keys.insert(key)
                    if !inserted { return String(decoding: key, as: UTF8.self) }
                    stack[stack.count - 1] = .object(keys: keys, expectingKey: false)
                }
                index = end
            default:
                break
            }
            index += 1
        }
        return nil
    }

    /// A key's bytes with its escapes resolved (`user\u0049d` is `userId`); the raw bytes when
    /// they are not a valid JSON string (the decoder refuses the body anyway).
    private static func unescaped(_ raw: [UInt8]) -> [UInt8] {
        let quoted = Data([UInt8(ascii: "\"")] + raw + [UInt8(ascii: "\"")])
        guard let text = try? JSONSerialization.jsonObject(with: quoted, options: .fragmentsAllowed) as? String else { return raw }
        return Array(text.utf8)
    }
}
