import Foundation

// libFuzzer target: what the SDK's playback server reads from a player, any app on the device:
// a request's `Range` header against a file (Sources/ClientSDK/Playback/ByteRangeRequest.swift),
// or passed on to an origin for a file not downloaded yet (`forwardable`), and its path under the run's token (Sources/ClientSDK/Playback/PlaybackPath.swift). The
// input's first line is the Range value, the rest the request URI; the file's size comes from
// the input's length.

private let token = "t0k"

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPlaybackRequests(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: start, count: count), as: UTF8.self)
    let parts = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
    let header = parts.first.map(String.init)
    for size in [Int64(0), Int64(count), Int64(count) * 1_000_003, Int64.max / 2] {
        if case .part(let range) = ByteRangeRequest(header: header, size: size) {
            precondition(range.lowerBound >= 0 && range.lowerBound < range.upperBound && range.upperBound <= size)
        }
    }
    if let header, let forwarded = ByteRangeRequest.forwardable(header) {
        // One range of bytes, in digits: what goes to the origin is read the same way again.
        precondition(forwarded.hasPrefix("bytes=") && !forwarded.contains(",") && forwarded.utf8.count <= 6 + 19 + 1 + 19)
        precondition(ByteRangeRequest.forwardable(forwarded) == forwarded)
    }
    let uri = parts.count > 1 ? String(parts[1]) : text
    for candidate in [uri, "/\(token)/\(uri)", "/\(token)/asset/\(uri)"] {
        guard let path = PlaybackPath(uri: candidate, token: token) else { continue }
        let segments = path.relativePath.split(separator: "/", omittingEmptySubsequences: false)
        precondition(!path.assetId.isEmpty && !segments.isEmpty)
        precondition(segments.allSatisfy { !$0.isEmpty && $0 != "." && $0 != ".." && !$0.contains("\0") })
        // Read back the same, unless encoding made it longer than a path may be: a byte outside
        // the unreserved set takes three (a raw U+FFFD, three bytes, takes nine), and past 4,096
        // bytes a path is refused (found by the fuzzer: 1,966 bytes in, 4,210 out).
        let encoded = PlaybackPath.path(token: token, assetId: path.assetId, relativePath: path.relativePath)
        let again = PlaybackPath(uri: encoded, token: token)
        precondition(encoded.utf8.count > 4096 || (again?.assetId == path.assetId && again?.relativePath == path.relativePath))
    }
    return 0
}
