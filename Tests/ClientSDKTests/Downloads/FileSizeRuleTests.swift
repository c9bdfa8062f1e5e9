import ClientSDK
import Foundation
import Testing
import TestSupport

/// Files whose size the format fixes or bounds (`FileSizeRule`): an AES-128 key is 16 bytes, an
/// init section at most 8 MiB. An answer that breaks the rule, by what it declares or by what it
/// sends, fails its asset at once (`.origin`), is read no further than a byte past the rule, and
/// leaves nothing on disk, not even a partial file to resume.
@Suite(.serialized) struct FileSizeRuleTests {
    static let segment = TestOrigin.content(20_000, seed: 6)

    /// An HLS asset `name` whose one segment is under the key at `/<name>.key` (and, with
    /// `initSection`, after the init section at `/<name>-init.mp4`).
    static func serveAsset(_ name: String, on origin: HostileOrigin, initSection: Bool = false) {
        origin.serve("/s.ts", segment, contentType: "video/mp2t")
        let map = initSection ? "#EXT-X-MAP:URI=\"\(name)-init.mp4\"\n" : ""
        let playlist = HostileOriginTests.media("\(map)#EXT-X-KEY:METHOD=AES-128,URI=\"\(name).key\"\n#EXTINF:6,\ns.ts")
        origin.serve("/\(name).m3u8", Data(playlist.utf8), contentType: HostileOriginTests.playlistType)
    }

    static func key(headers: KeyValuePairs<String, String>, body: Data, then rest: [HostileOrigin.Part] = []) -> HostileOrigin.Script {
        { _, _ in [.bytes(HostileOrigin.answer(headers: headers, body: body))] + rest }
    }

    /// The asset's failure, checked to be the origin's; and no file or partial file whose path
    /// contains `broken` (its key, its init section) is left in its directory.
    static func failsAndKeepsNothing(
        _ bench: DownloadBench, _ assetId: String, of broken: String, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        // Well within the 30 s read timeout a key that never ends would otherwise take.
        let asset = try await bench.waitForOutcome(assetId, timeout: .seconds(20), sourceLocation: sourceLocation)
        guard case .failed(let failure) = asset.state else {
            Issue.record("\(assetId) is \(asset.state), not failed", sourceLocation: sourceLocation)
            return
        }
        #expect(failure.kind == .origin && asset.errorCount == 1, "\(assetId): \(failure)", sourceLocation: sourceLocation)
        let content = bench.dataDirectory.appendingPathComponent("content")
        let left = FileManager.default.enumerator(at: content, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL }
            .filter { $0.path.contains(broken) } ?? []
        #expect(left.filter { !$0.hasDirectoryPath }.isEmpty, "\(assetId) left \(left.map(\.lastPathComponent))", sourceLocation: sourceLocation)
    }

    @Test func aKeyThatIsNotSixteenBytesFailsItsAsset() async throws {
        let bench = try await DownloadBench.start()
        let origin = try await HostileOrigin.start()
        let type = "application/octet-stream"

        // A gigabyte declared: refused before its body is read (the origin then goes silent).
        Self.serveAsset("gigabyte", on: origin)
        origin.route("/gigabyte.key", Self.key(
            headers: ["Content-Type": type, "Content-Length": "1073741824"], body: Data(count: 1_000), then: [.pause(.seconds(60)), .close]))
        // No length, 17 bytes, then silence: reading stops at the 17th byte, not at the read timeout.
        Self.serveAsset("seventeen", on: origin)
        origin.route("/seventeen.key", Self.key(headers: ["Content-Type": type], body: Data(count: 17), then: [.pause(.seconds(60)), .close]))
        // A megabyte without a length, closed at its end.
        Self.serveAsset("megabyte", on: origin)
        origin.route("/megabyte.key", Self.key(headers: ["Content-Type": type, "Connection": "close"], body: Data(count: 1 << 20), then: [.close]))
        // Too short, as declared.
        Self.serveAsset("fifteen", on: origin)
        origin.route("/fifteen.key", Self.key(headers: ["Content-Type": type, "Content-Length": "15"], body: Data(count: 15)))

        for name in ["gigabyte", "seventeen", "megabyte", "fifteen"] {
            try await bench.engine.downloads.enqueue(DownloadRequest(assetId: name, url: origin.url("/\(name).m3u8"), kind: .hls))
            try await Self.failsAndKeepsNothing(bench, name, of: "/keys/")
        }

        // Sixteen bytes are a key.
        let key = TestOrigin.content(16, seed: 9)
        Self.serveAsset("sixteen", on: origin)
        origin.serve("/sixteen.key", key, contentType: type)
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "sixteen", url: origin.url("/sixteen.m3u8"), kind: .hls))
        let sixteen = try await bench.waitForOutcome("sixteen")
        #expect(sixteen.state == .completed, "\(String(describing: sixteen.lastFailure))")
        let directory = try #require(sixteen.localURL).deletingLastPathComponent()
        // Kept sealed (never the key in the clear), served opened.
        let stored = try Data(contentsOf: directory.appendingPathComponent("keys/0.key"))
        #expect(stored.range(of: key) == nil && stored.count == key.count + 32)
        let served = try await PlaybackServerTests.get(
            try await bench.engine.playback.url(for: "sixteen").deletingLastPathComponent().appendingPathComponent("keys/0.key"))
        #expect(served.body == key)
        await origin.stop()
        await bench.stop()
    }

    @Test func anInitSectionPastItsBoundFailsItsAsset() async throws {
        let bench = try await DownloadBench.start()
        let origin = try await HostileOrigin.start()
        let key = TestOrigin.content(16, seed: 9)
        let bound = 8 << 20
        // Declared past the bound.
        Self.serveAsset("declared", on: origin, initSection: true)
        origin.serve("/declared.key", key, contentType: "application/octet-stream")
        origin.route("/declared-init.mp4", Self.key(
            headers: ["Content-Type": "video/mp4", "Content-Length": "\(bound + 1)"], body: Data(count: 1_000), then: [.pause(.seconds(60)), .close]))
        // No length, and a byte past the bound before the silence.
        Self.serveAsset("sent", on: origin, initSection: true)
        origin.serve("/sent.key", key, contentType: "application/octet-stream")
        origin.route("/sent-init.mp4", Self.key(headers: ["Content-Type": "video/mp4"], body: Data(count: bound + 1), then: [.pause(.seconds(60)), .close]))
        for name in ["declared", "sent"] {
            try await bench.engine.downloads.enqueue(DownloadRequest(assetId: name, url: origin.url("/\(name).m3u8"), kind: .hls))
            try await Self.failsAndKeepsNothing(bench, name, of: "/init-")
        }
        // One of a real size downloads.
        Self.serveAsset("real", on: origin, initSection: true)
        origin.serve("/real.key", key, contentType: "application/octet-stream")
        origin.serve("/real-init.mp4", TestOrigin.content(2_000, seed: 4))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "real", url: origin.url("/real.m3u8"), kind: .hls))
        #expect(try await bench.waitForOutcome("real").state == .completed)
        await origin.stop()
        await bench.stop()
    }
}
