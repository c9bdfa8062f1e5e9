@testable import ClientSDK
import Foundation
import NIOHTTP1
import Testing
import TestSupport

/// Every fetch a download makes (the master and media playlists, an MPD, keys, init sections,
/// segments) is tried under one policy (`FetchRetry`): three times in a row before the pass
/// counts an error, waiting between tries what the origin's `Retry-After` asks, up to a bound.
/// The waits are recorded, not spent: no test here waits on the wall clock.
@Suite(.serialized) struct FetchRetryTests {
    /// A recorder of the waits between tries, which returns at once.
    final class Waits: Sendable {
        private let box = LockedBox<[Duration]>([])
        var all: [Duration] { box.withLock { $0 } }
        var wait: @Sendable (Duration) async throws -> Void {
            { [box] duration in box.withLock { $0.append(duration) } }
        }
    }

    /// Answers 503 to the first two `GET`s of every path (a CDN warming up), then serves.
    static func warmingUp(_ origin: TestOrigin) {
        let seen = LockedBox<[String: Int]>([:])
        origin.setGate { path, _ in
            let count = seen.withLock { seen -> Int in
                seen[path, default: 0] += 1
                return seen[path]!
            }
            return count <= 2 ? 503 : nil
        }
    }

    static func bench(_ waits: Waits) async throws -> DownloadBench {
        try await DownloadBench.start(options: { $0.waitBeforeRetry = waits.wait })
    }

    /// An HLS asset (master, media playlists, an AES-128 key, an init section, byte-range
    /// segments) from an origin that refuses every path twice downloads completely in its first
    /// pass: queueing tried the master once, and the download tried each file three times.
    @Test func anHLSAssetWhoseOriginRefusesEveryPathTwiceDownloadsInOnePass() async throws {
        let waits = Waits()
        let bench = try await Self.bench(waits)
        let hls = TestHLSAsset(serving: bench.origin)
        Self.warmingUp(bench.origin)
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "show", url: bench.origin.url("/hls/master.m3u8"), kind: .hls, maxVideoBitrate: 0, audioLanguages: ["en"],
            subtitleLanguages: []))
        let asset = try await bench.waitForOutcome("show")
        #expect(asset.state == .completed, "\(String(describing: asset.lastFailure))")
        // No pass ended in an error (a completed asset's error count is 0 whatever it took).
        #expect(bench.events.count("downloadError") == 0)
        for path in ["/hls/master.m3u8", "/hls/low/video.m3u8", "/hls/audio/en.m3u8", "/hls/keys/k1.key", "/hls/low/init.mp4", "/hls/audio/en/0.aac"] {
            #expect(bench.origin.requests(path) == 3, "\(path): \(bench.origin.requests(path)) requests")
        }
        // Two waits per path but the master's first (queueing does not wait), each the
        // backoff's; none spent.
        #expect(waits.all.count >= 2 * 7 - 1, "\(waits.all)")
        #expect(waits.all.allSatisfy { FetchRetry.backoff.contains($0) }, "\(waits.all)")
        let local = try #require(asset.localURL).deletingLastPathComponent()
        #expect(try Data(contentsOf: local.appendingPathComponent("video/0.mp4")) == hls.videoSegment("low", 0))
        await bench.stop()
    }

    /// The same for DASH: the MPD, the init section and the segments.
    @Test func aDASHAssetWhoseOriginRefusesEveryPathTwiceDownloadsInOnePass() async throws {
        let waits = Waits()
        let bench = try await Self.bench(waits)
        let manifest = """
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S">
              <Period>
                <AdaptationSet contentType="video" mimeType="video/mp4">
                  <SegmentTemplate timescale="1" duration="2" media="v$Number$.m4s" initialization="init.mp4"/>
                  <Representation id="v" bandwidth="100000"/>
                </AdaptationSet>
              </Period>
            </MPD>
            """
        bench.origin.serve("/dash/manifest.mpd", Data(manifest.utf8), contentType: "application/dash+xml")
        for file in ["init.mp4", "v1.m4s", "v2.m4s"] { bench.origin.serve("/dash/\(file)", TestOrigin.content(3_000)) }
        Self.warmingUp(bench.origin)
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "dash", url: bench.origin.url("/dash/manifest.mpd"), kind: .dash))
        let asset = try await bench.waitForOutcome("dash")
        #expect(asset.state == .completed, "\(String(describing: asset.lastFailure))")
        #expect(bench.events.count("downloadError") == 0)
        for path in ["/dash/manifest.mpd", "/dash/init.mp4", "/dash/v1.m4s", "/dash/v2.m4s"] {
            #expect(bench.origin.requests(path) == 3, "\(path): \(bench.origin.requests(path)) requests")
        }
        #expect(waits.all.count == 2 * 4 - 1, "\(waits.all)")
        await bench.stop()
    }

    /// `Retry-After` is waited as asked, up to `FetchRetry.maxRetryAfter` (an hour asked is
    /// 30 s waited), and the file comes on its third try.
    @Test func retryAfterIsHonouredWithinItsBound() async throws {
        let waits = Waits()
        let bench = try await Self.bench(waits)
        let origin = try await HostileOrigin.start()
        let body = TestOrigin.content(40_000, seed: 5)
        origin.route("/later.mp4") { _, attempt in
            switch attempt {
            case 1: [.bytes(HostileOrigin.answer(status: "503 Service Unavailable", headers: ["Retry-After": "7", "Content-Length": "0"]))]
            case 2: [.bytes(HostileOrigin.answer(status: "429 Too Many Requests", headers: ["Retry-After": "3600", "Content-Length": "0"]))]
            default: [.bytes(HostileOrigin.answer(headers: ["Content-Type": "video/mp4", "Content-Length": "\(body.count)"], body: body))]
            }
        }
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "later", url: origin.url("/later.mp4")))
        let asset = try await bench.waitForOutcome("later")
        #expect(asset.state == .completed && bench.events.count("downloadError") == 0, "\(asset.state)")
        #expect(waits.all == [.seconds(7), FetchRetry.maxRetryAfter], "\(waits.all)")
        #expect(origin.requests("/later.mp4") == 3)
        await origin.stop()
        await bench.stop()
    }

    /// `Retry-After` is the origin's: seconds as digits or an HTTP date are read, anything else
    /// is no wait asked, and nothing is waited beyond the bound.
    @Test func retryAfterIsReadStrictly() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        func read(_ value: String) -> Duration? { FetchRetry.retryAfter(HTTPHeaders([("Retry-After", value)]), now: now) }
        #expect(read("12") == .seconds(12))
        #expect(read("0") == .zero)
        #expect(read("99999999999999999999999") == nil)
        #expect(read("9223372036854775807") == FetchRetry.maxRetryAfter)
        for wrong in ["-5", "+5", "1.5", "soon", "", "0x10"] { #expect(read(wrong) == nil, "\(wrong)") }
        // Tue, 14 Nov 2023 22:13:40 GMT is 1_700_000_020.
        #expect(read("Tue, 14 Nov 2023 22:13:40 GMT") == .seconds(20))
        #expect(read("Tue, 14 Nov 2023 22:13:00 GMT") == .zero)
        #expect(read("Wed, 15 Nov 2023 22:13:20 GMT") == FetchRetry.maxRetryAfter)
        let policy = FetchRetry(sleep: { _ in })
        let asked = DownloadFailure(.http, status: 503, retryAfter: .seconds(3600), "")
        #expect(policy.delay(after: asked, failures: 1) == FetchRetry.maxRetryAfter)
        #expect(policy.delay(after: DownloadFailure(.http, status: 503, ""), failures: 2) == FetchRetry.backoff[1])
    }
}
