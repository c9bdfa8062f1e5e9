import Foundation

// libFuzzer target: the DASH MPD reader (Sources/ClientSDK/Download/DASH) on any bytes: the XML
// document under its limits, the manifest's Periods and AdaptationSets, every Representation's
// segment list under a budget, and the same bytes read as a `sidx` index range. Any trap,
// overflow or memory error is a crash libFuzzer reports.

private let base = URL(string: "https://cdn.example.com/vod/show/manifest.mpd")!

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMPD(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let data = Data(bytes: start, count: count)
    // The bytes as an index range anywhere in a file, to its last addressable offsets.
    for offset in [0, Int64(count), Int64(1) << 62, Int64.max - Int64(count)] {
        _ = try? SegmentIndex.parse(data, at: offset, maxReferences: 10_000)
    }
    guard let root = try? MPDDocument.parse(data), let manifest = try? DASHManifest(root: root, url: base) else { return 0 }
    for period in manifest.periods {
        for set in period.adaptationSets {
            _ = set.language.map { LanguageCodes.matches($0, anyOf: ["fr", "en-US"]) }
            _ = BitrateChoice.choose(set.representations, maxBitrate: 1_000_000, bandwidth: \.bandwidth)
            for representation in set.representations {
                switch try? DASHSegments.track(representation, period: period, maxSegments: 10_000) {
                case .track(let track)?: _ = track.seconds
                case .index(let index)?: _ = index.indexRange.httpRange
                case nil: break
                }
            }
        }
    }
    return 0
}
