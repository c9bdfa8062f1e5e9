import Foundation

// libFuzzer target: the readers of byte positions that come from outside: an origin's
// `Content-Range` (Sources/ClientSDK/Download/ContentRange.swift) and a playlist's
// `EXT-X-BYTERANGE`, explicit and implicit (Sources/ClientSDK/Download/HLSPlaylist.swift).
// The input's first line is read as a Content-Range value and as two byte ranges on one file.

private let base = URL(string: "https://cdn.example.com/vod/video.m3u8")!

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzByteRanges(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: start, count: count), as: UTF8.self)
    let parts = text.split(separator: "\n", maxSplits: 2, omittingEmptySubsequences: false)
    let first = parts.first.map(String.init) ?? ""
    if let range = ContentRange(first) {
        precondition(range.first <= range.last && range.length > 0)
        if let complete = range.complete { precondition(range.last < complete) }
    }
    _ = ContentRange.request(from: Int64(count), through: count % 2 == 0 ? nil : Int64(count) * 2)
    let second = parts.count > 1 ? String(parts[1]) : first
    let playlist = "#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXTINF:6,\n#EXT-X-BYTERANGE:\(first)\nv.ts\n#EXTINF:6,\n#EXT-X-BYTERANGE:\(second)\nv.ts\n"
        + "#EXT-X-MAP:URI=\"i.mp4\",BYTERANGE=\"\(second)\"\n#EXTINF:6,\ns.ts\n#EXT-X-ENDLIST\n"
    if case .media(let media)? = try? HLSPlaylist.parse(Data(playlist.utf8), url: base) {
        for segment in media.segments {
            if let range = segment.byteRange {
                precondition(range.length > 0 && range.offset >= 0)
                _ = range.httpRange
            }
            _ = segment.initSection?.byteRange?.httpRange
        }
    }
    return 0
}
