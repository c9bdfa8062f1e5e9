import ClientSDK
import Foundation
import Testing
import TestSupport

/// Part of a title (`DownloadRequest.timeRange`) of assets made by ffmpeg (4 s at 25 frames per
/// second, 1 s segments): only the segments that overlap the range are fetched, and ffprobe
/// decodes exactly their frames through the playback server, AES-128 HLS and DASH alike;
/// GStreamer plays each to its end. (That the kept HLS segments keep their sequence numbers,
/// which a key without an IV needs, is `TimeRangeTests`' to check: a wrong IV spoils only a
/// segment's first 16 bytes, which a decoder gets past.) Needs Debian's ffmpeg and GStreamer (see `PlaybackPlayersTests` for how CI
/// makes sure it ran).
@Suite(.serialized) struct PartOfATitleTests {
    @Test func partOfAnHLSAndADASHTitleHoldsExactlyTheFramesOfItsSegments() async throws {
        guard PlaybackPlayersTests.playersAreInstalled() else { return }
        let root = try createdTemporaryDirectory("backplane-part")
        defer { try? FileManager.default.removeItem(at: root) }
        let bench = try await DownloadBench.start()
        try await PlaybackPlayersTests.makeAsset(.tsAES128, in: root, origin: bench.origin)
        try await DASHDownloadTests.makeAsset(.template, in: root, origin: bench.origin)

        // HLS, 1.5 s to 2.5 s: the second and third segments (1–2 s, 2–3 s), 50 frames.
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "hls-part", url: bench.origin.url("/tsAES128/master.m3u8"), kind: .hls, timeRange: MediaTimeRange(start: 1.5, end: 2.5)))
        let hls = try await bench.waitForOutcome("hls-part", timeout: .seconds(60))
        try #require(hls.state == .completed, "\(String(describing: hls.lastFailure))")
        #expect(bench.origin.requests(under: "/tsAES128/seg").keys.sorted() == ["/tsAES128/seg1.ts", "/tsAES128/seg2.ts"])
        let hlsURL = try await bench.engine.playback.url(for: "hls-part")
        #expect(try await PlaybackPlayersTests.countFrames(hlsURL) == 50, "ffprobe through \(hlsURL)")
        let (hlsPlayed, hlsOutput) = try await PlaybackPlayersTests.playsToTheEnd(hlsURL)
        #expect(hlsPlayed, "gst-launch playbin \(hlsURL): \(hlsOutput)")

        // DASH, from 2 s to the end: the third and fourth segments of the 300 kbit/s video and
        // the French audio, 50 frames.
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "dash-part", url: bench.origin.url("/template/manifest.mpd"), kind: .dash, maxVideoBitrate: 500_000,
            audioLanguages: ["fr"], timeRange: MediaTimeRange(start: 2)))
        let dash = try await bench.waitForOutcome("dash-part", timeout: .seconds(60))
        try #require(dash.state == .completed, "\(String(describing: dash.lastFailure))")
        #expect(bench.origin.requests(under: "/template/chunk-stream0-").keys.sorted() == [
            "/template/chunk-stream0-00003.m4s", "/template/chunk-stream0-00004.m4s",
        ])
        let dashURL = try await bench.engine.playback.url(for: "dash-part")
        #expect(try await PlaybackPlayersTests.countFrames(dashURL) == 50, "ffprobe through \(dashURL)")
        let (dashPlayed, dashOutput) = try await PlaybackPlayersTests.playsToTheEnd(dashURL)
        #expect(dashPlayed, "gst-launch playbin \(dashURL): \(dashOutput)")
        await bench.stop()
        try PlaybackPlayersTests.report(
            "part: ffprobe counted the 50 frames of 2 of 4 segments of an AES-128 HLS and a DASH title downloaded in part; GStreamer played both")
    }
}
