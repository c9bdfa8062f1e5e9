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
        let body = String(decoding: copy, as: UTF8.self)
        // Keys with escapes are reported unescaped; plain ones appear as they are.
        if !key.contains("\\"), key.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0 != "\"" }) {
            precondition(body.contains("\"\(key)\"") || body.contains("\\"), "a key that is not in the body: \(key)")
        }
    }
    return 0
}
