import ClientSDK
import Foundation
import NIOHTTP1
import Testing
import TestSupport

/// The size estimate from an origin that refuses `HEAD`, as many CDNs and signed URLs do: the
/// first byte asked by a ranged `GET` gives the size (`Content-Range`'s total), and when the
/// origin answers neither, the manifest's declared bandwidth × duration does, marked inexact
/// (`EstimateBasis.bandwidth`), in the SDK and in the harness's `download --estimate`.
@Suite(.serialized) struct SizeEstimateFallbackTests {
    /// A flat file whose origin refuses `HEAD` and answers `Range: bytes=0-0` with its first byte.
    static func routeRefusingHead(_ path: String, body: Data, on origin: HostileOrigin) {
        origin.route(path, answeringHead: true) { head, _ in
            if head.method == .HEAD {
                return [.bytes(HostileOrigin.answer(status: "403 Forbidden", headers: ["Content-Length": "0"]))]
            }
            if head.headers.first(name: "range") == "bytes=0-0" {
                return [.bytes(HostileOrigin.answer(
                    status: "206 Partial Content",
                    headers: ["Content-Type": "video/mp4", "Content-Length": "1", "Content-Range": "bytes 0-0/\(body.count)"], body: body.prefix(1)))]
            }
            return [.bytes(HostileOrigin.answer(headers: ["Content-Type": "video/mp4", "Content-Length": "\(body.count)"], body: body))]
        }
    }

    @Test func aFlatFileIsSizedByItsFirstByteWhenTheOriginRefusesHEAD() async throws {
        let bench = try await DownloadBench.start()
        let origin = try await HostileOrigin.start()
        let body = TestOrigin.content(300_000, seed: 2)
        Self.routeRefusingHead("/film.mp4", body: body, on: origin)
        let request = DownloadRequest(assetId: "film", url: origin.url("/film.mp4"))
        let estimate = try await bench.engine.downloads.estimate(request)
        #expect(estimate.bytes == 300_000 && estimate.isExact && estimate.basis == .exact, "\(estimate)")
        // One HEAD, one GET of the first byte: nothing else was asked.
        #expect(origin.heads("/film.mp4").map { "\($0.method.rawValue) \($0.headers.first(name: "range") ?? "")" } == ["HEAD ", "GET bytes=0-0"])

        // An origin that ignores the range answers in full: its length is the size, its body unread.
        origin.route("/whole.mp4", answeringHead: true) { head, _ in
            head.method == .HEAD
                ? [.bytes(HostileOrigin.answer(status: "405 Method Not Allowed", headers: ["Content-Length": "0"]))]
                : [.bytes(HostileOrigin.answer(headers: ["Content-Type": "video/mp4", "Content-Length": "\(body.count)"], body: body))]
        }
        #expect(try await bench.engine.downloads.estimate(DownloadRequest(assetId: "whole", url: origin.url("/whole.mp4"))).bytes == 300_000)

        // Queued, the asset carries the estimate and downloads.
        let queued = try await bench.engine.downloads.enqueue(request)
        #expect(queued.estimatedBytes == 300_000)
        #expect(try await bench.waitForOutcome("film").state == .completed)
        await origin.stop()
        await bench.stop()
    }

    /// An HLS asset (a key and an init section besides the segments, and an audio rendition
    /// without a bandwidth of its own) whose origin answers neither `HEAD` nor the ranged `GET`:
    /// the variant's `BANDWIDTH` × duration, inexact.
    @Test func anHLSAssetIsEstimatedFromItsBandwidthWhenTheOriginStatesNoSize() async throws {
        let bench = try await DownloadBench.start()
        let origin = try await Self.originRefusingSizes(hls: true)
        let estimate = try await bench.engine.downloads.estimate(DownloadRequest(assetId: "hls", url: origin.url("/master.m3u8"), kind: .hls))
        // 800 kbit/s for 3 × 6 s, and the local playlists.
        #expect(estimate.basis == .bandwidth && !estimate.isExact, "\(estimate)")
        #expect((1_800_000..<1_810_000).contains(estimate.bytes), "\(estimate)")
        await origin.stop()
        await bench.stop()
    }

    @Test func aDASHAssetIsEstimatedFromItsBandwidthWhenTheOriginStatesNoSize() async throws {
        let bench = try await DownloadBench.start()
        let origin = try await Self.originRefusingSizes(hls: false)
        let estimate = try await bench.engine.downloads.estimate(DownloadRequest(assetId: "dash", url: origin.url("/manifest.mpd"), kind: .dash))
        // 800 kbit/s for 3 × 6 s, and the local MPD.
        #expect(estimate.basis == .bandwidth && !estimate.isExact, "\(estimate)")
        #expect((1_800_000..<1_810_000).contains(estimate.bytes), "\(estimate)")
        await origin.stop()
        await bench.stop()
    }

    /// The harness prints what the estimate rests on.
    @Test func theHarnessShowsAnInexactEstimate() async throws {
        let root = try createdTemporaryDirectory("harness-estimate")
        defer { try? FileManager.default.removeItem(at: root) }
        let backplane = try await HarnessEndToEndTests.ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        let origin = try await Self.originRefusingSizes(hls: true)
        let harness = try backplane.harness(user: "viewer")
        let printed = try await harness.run(
            ["download", "--asset-id", "show", "--url", origin.url("/master.m3u8").absoluteString, "--hls", "--estimate"], device: "phone")
        #expect(printed.status == 0, "\(printed.json)")
        #expect(printed.json["isExact"] == .bool(false) && printed.json["basis"] == .string("bandwidth"), "\(printed.json)")
        #expect((printed.json["bytes"]?.intValue).map { (1_800_000..<1_810_000).contains($0) } == true, "\(printed.json)")
        await origin.stop()
    }

    /// An origin that refuses `HEAD` and the first-byte `GET` of every file (HostileOrigin's
    /// default) and serves an asset of 800 kbit/s for 18 s in three segments, with an AES-128
    /// key and an init section: HLS (a master with an audio rendition) or DASH.
    static func originRefusingSizes(hls: Bool) async throws -> HostileOrigin {
        let origin = try await HostileOrigin.start()
        for index in 0..<3 { origin.serve("/v\(index).mp4", TestOrigin.content(30_000, seed: UInt8(index)), contentType: "video/mp4") }
        origin.serve("/init.mp4", TestOrigin.content(1_000))
        if hls {
            let type = HostileOriginTests.playlistType
            origin.serve("/k.key", TestOrigin.content(16), contentType: "application/octet-stream")
            let segments = (0..<3).map { "#EXTINF:6,\nv\($0).mp4" }.joined(separator: "\n")
            origin.serve("/video.m3u8", Data(HostileOriginTests.media("#EXT-X-MAP:URI=\"init.mp4\"\n#EXT-X-KEY:METHOD=AES-128,URI=\"k.key\"\n" + segments).utf8), contentType: type)
            origin.serve("/audio.m3u8", Data(HostileOriginTests.media((0..<3).map { "#EXTINF:6,\na\($0).aac" }.joined(separator: "\n")).utf8), contentType: type)
            origin.serve("/master.m3u8", Data("""
                #EXTM3U
                #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="English",LANGUAGE="en",DEFAULT=YES,URI="audio.m3u8"
                #EXT-X-STREAM-INF:BANDWIDTH=800000,AUDIO="a"
                video.m3u8

                """.utf8), contentType: type)
        } else {
            origin.serve("/manifest.mpd", Data("""
                <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT18S">
                  <Period>
                    <AdaptationSet contentType="video" mimeType="video/mp4">
                      <SegmentTemplate timescale="1" duration="6" startNumber="0" media="v$Number$.mp4" initialization="init.mp4"/>
                      <Representation id="v" bandwidth="800000"/>
                    </AdaptationSet>
                  </Period>
                </MPD>
                """.utf8), contentType: "application/dash+xml")
        }
        return origin
    }
}
