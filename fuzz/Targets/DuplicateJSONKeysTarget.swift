import Foundation

// libFuzzer target: the server's duplicate-key scanner (Sources/Backplane/HTTP/DuplicateJSONKeys.swift),
// which reads every request body before the JSON decoder does. It must never read outside the
// buffer, and a key it reports must be in the body.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDuplicateJSONKeys(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    // A copy of exactly `count` bytes, so that the address sanitizer sees any read past the end.
    let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 1)
    defer { copy.deallocate() }
    copy.copyMemory(from: UnsafeRawBufferPointer(start: start, count: count))
    if let key = DuplicateJSONKeys.first(in: UnsafeRawBufferPointer(copy)) {
        let body = Array(copy)
        // Keys with escapes are reported unescaped, and bytes that are not UTF-8 come back as
        // U+FFFD; any other key appears in the body, quoted, byte for byte. (Compared as bytes:
        // String.contains compares characters, and a combining mark after the closing quote makes
        // `"a"` + U+0301 one character that `"a"` does not match.)
        if !body.contains(UInt8(ascii: "\\")), !key.contains("\u{FFFD}") {
            let quoted = [UInt8(ascii: "\"")] + Array(key.utf8) + [UInt8(ascii: "\"")]
            precondition(occurs(quoted, in: body), "a key that is not in the body: \(key)")
        }
    }
    return 0
}

private func occurs(_ needle: [UInt8], in haystack: [UInt8]) -> Bool {
    guard needle.count <= haystack.count else { return false }
    return (0...(haystack.count - needle.count)).contains { start in
        haystack[start..<(start + needle.count)].elementsEqual(needle)
    }
}
