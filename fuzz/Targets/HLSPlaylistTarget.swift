import Foundation

// libFuzzer target: the HLS playlist parser (Sources/ClientSDK/Download/HLSPlaylist.swift) on any
// bytes, and what the engine then asks of a parsed playlist. Any trap, overflow or memory error
// is a crash libFuzzer reports.

private let base = URL(string: "https://cdn.example.com/vod/show/master.m3u8")!

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHLSPlaylist(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    guard let playlist = try? HLSPlaylist.parse(Data(bytes: start, count: count), url: base, maxSegments: 10_000) else { return 0 }
    switch playlist {
    case .master(let master):
        for limit in [nil, 0, Int.max] { _ = master.variant(maxBitrate: limit) }
        for variant in master.variants {
            _ = master.renditions(.audio, group: variant.audioGroup, languages: nil)
            _ = master.renditions(.subtitles, group: variant.subtitlesGroup, languages: ["en"])
        }
    case .media(let media):
        _ = media.duration
        for segment in media.segments {
            _ = segment.byteRange?.httpRange
            _ = segment.initSection?.byteRange?.httpRange
            _ = segment.key?.isDownloadable
        }
    }
    return 0
}
