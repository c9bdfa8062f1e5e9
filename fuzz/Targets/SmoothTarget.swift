import Foundation

// libFuzzer target: the Smooth Streaming client manifest reader (Sources/ClientSDK/Download/Smooth)
// on any bytes: the XML document under its limits, the streams, quality levels and fragments
// (t, d and r under a budget), each protection header's pssh box and PlayReady key id, and the
// same bytes read as a PlayReady object. Any trap, overflow or memory error is a crash libFuzzer
// reports.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSmooth(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let data = Data(bytes: start, count: count)
    _ = SmoothProtection.playReadyKeyId(data)
    guard let root = try? MPDDocument.parseXML(data), let manifest = try? SmoothManifest(root: root, maxFragments: 10_000) else { return 0 }
    _ = manifest.protection.map(\.systemId)
    for stream in manifest.streams {
        _ = stream.language.map { LanguageCodes.matches($0, anyOf: ["fr", "en-US"]) }
        _ = BitrateChoice.choose(stream.qualityLevels, maxBitrate: 1_000_000, bandwidth: \.bitrate)
        // What the plan works out of each fragment: its start from the stream's first, in seconds.
        let first = stream.fragments[0].time
        _ = stream.fragments.reduce(0.0) { $0 + Double($1.time - first) / Double(stream.timescale) + Double($1.duration) }
    }
    return 0
}
