import Foundation
import Testing
@testable import ClientSDK

/// Part of a title (`DownloadRequest.timeRange`): the HLS and DASH plans keep the whole
/// segments that overlap the range, the local playlist or MPD describes exactly those, and a
/// range with nothing in it, or one that makes no sense, is refused with the reason.
@Suite struct TimeRangeTests {
    static let hlsURL = URL(string: "https://cdn.example.com/v/media.m3u8")!

    /// Four segments of 2 s from media sequence 10 after a clear init section, under a key
    /// without an IV (the sequence number is the IV), the last under another key.
    static let playlist = """
        #EXTM3U
        #EXT-X-TARGETDURATION:2
        #EXT-X-MEDIA-SEQUENCE:10
        #EXT-X-MAP:URI="init.mp4"
        #EXT-X-KEY:METHOD=AES-128,URI="k1.bin"
        #EXTINF:2,
        s0.m4s
        #EXTINF:2,
        s1.m4s
        #EXTINF:2,
        s2.m4s
        #EXT-X-KEY:METHOD=AES-128,URI="k2.bin"
        #EXTINF:2,
        s3.m4s
        #EXT-X-ENDLIST
        """

    static func hlsPlan(_ range: MediaTimeRange) throws -> DownloadPlan {
        guard case .media(let media) = try HLSPlaylist.parse(Data(playlist.utf8), url: hlsURL, maxSegments: 100) else {
            throw MPDError("not a media playlist")
        }
        return try HLSPlan.make(master: nil, streams: [(HLSPlan.Stream(name: "video", url: hlsURL, bandwidth: 800_000), media)], timeRange: range)
    }

    @Test func anHLSPlaylistKeepsTheWholeSegmentsThatOverlapTheRange() throws {
        // 3 s to 5 s lies in the second and third segments (2–4 s, 4–6 s).
        let plan = try Self.hlsPlan(MediaTimeRange(start: 3, end: 5))
        #expect(plan.files.map { $0.url.lastPathComponent } == ["init.mp4", "k1.bin", "s1.m4s", "s2.m4s"])
        let local = try #require(plan.written.first?.text)
        #expect(local.contains("#EXT-X-MEDIA-SEQUENCE:11\n"), "the first segment kept keeps its number (its IV): \(local)")
        #expect(local.contains("#EXT-X-KEY:METHOD=AES-128,URI=\"keys/0.key\"") && local.contains("#EXT-X-MAP:URI=\"video/init-0.mp4\""))
        #expect(local.components(separatedBy: "#EXTINF:").count - 1 == 2)
        #expect(local.hasSuffix("#EXT-X-ENDLIST\n"))
        // The estimate is the kept part's: 4 s at 800 kbit/s.
        #expect(plan.estimatedBytes == 400_000)

        // From 7 s to the end: the last segment only, under its own key.
        let tail = try Self.hlsPlan(MediaTimeRange(start: 7))
        #expect(tail.files.map { $0.url.lastPathComponent } == ["init.mp4", "k2.bin", "s3.m4s"])
        #expect(try #require(tail.written.first?.text).contains("#EXT-X-MEDIA-SEQUENCE:13\n"))

        // A boundary belongs to the segment that starts there.
        #expect(try Self.hlsPlan(MediaTimeRange(start: 2, end: 4)).files.map { $0.url.lastPathComponent } == ["init.mp4", "k1.bin", "s1.m4s"])
    }

    /// An ad stitched in: the local playlist keeps the discontinuities where they stood, and a
    /// cut past one counts it in the discontinuity sequence, as players line renditions up by it.
    @Test func discontinuitiesStayWhereTheyStoodAndACutCountsThem() throws {
        let text = """
            #EXTM3U
            #EXT-X-TARGETDURATION:2
            #EXT-X-DISCONTINUITY-SEQUENCE:3
            #EXTINF:2,
            film0.ts
            #EXT-X-DISCONTINUITY
            #EXTINF:2,
            ad0.ts
            #EXT-X-DISCONTINUITY
            #EXTINF:2,
            film1.ts
            #EXT-X-ENDLIST
            """
        guard case .media(let media) = try HLSPlaylist.parse(Data(text.utf8), url: Self.hlsURL, maxSegments: 100) else {
            Issue.record("not a media playlist")
            return
        }
        #expect(media.discontinuitySequence == 3 && media.segments.map(\.discontinuity) == [false, true, true])
        let stream = HLSPlan.Stream(name: "video", url: Self.hlsURL, bandwidth: nil)
        let whole = try #require(try HLSPlan.make(master: nil, streams: [(stream, media)]).written.first?.text)
        #expect(whole.contains("#EXT-X-DISCONTINUITY-SEQUENCE:3\n"), "\(whole)")
        #expect(whole.contains("video/0.ts\n#EXT-X-DISCONTINUITY\n#EXTINF:2.0,\nvideo/1.ts\n#EXT-X-DISCONTINUITY\n#EXTINF:2.0,\nvideo/2.ts"), "\(whole)")
        // From 3 s: the ad (its discontinuity now the first segment's, so counted) and the film.
        let cut = try #require(try HLSPlan.make(master: nil, streams: [(stream, media)], timeRange: .init(start: 3)).written.first?.text)
        #expect(cut.contains("#EXT-X-DISCONTINUITY-SEQUENCE:4\n") && cut.components(separatedBy: "#EXT-X-DISCONTINUITY\n").count == 2, "\(cut)")
    }

    @Test func aRangePastTheEndIsRefusedWithTheTitlesLength() throws {
        do {
            _ = try Self.hlsPlan(MediaTimeRange(start: 8, end: 20))
            Issue.record("a range past the end was accepted")
        } catch let error as DownloadFailure {
            #expect(error.kind == .playlist)
            #expect(error.message.contains("lasts 8.000 s"), "\(error.message)")
            #expect(!error.isPassing, "the same playlist will say the same")
        }
    }

    @Test func aRangeThatMakesNoSenseIsRefusedWhenQueued() {
        let url = URL(string: "https://cdn.example.com/a.m3u8")!
        for (range, reason) in [
            (MediaTimeRange(start: -1), "0 or more"), (MediaTimeRange(start: .nan), "0 or more"),
            (MediaTimeRange(start: 5, end: 5), "after its start"), (MediaTimeRange(start: 0, end: .infinity), "after its start"),
        ] {
            let problem = DownloadRequest(assetId: "a", url: url, kind: .hls, timeRange: range).problem
            #expect(problem?.contains(reason) == true, "\(range): \(problem ?? "accepted")")
        }
        #expect(DownloadRequest(assetId: "a", url: url, kind: .file, timeRange: .init(start: 1)).problem?.contains("flat file") == true)
        #expect(DownloadRequest(assetId: "a", url: url, kind: .dash, timeRange: .init(start: 1, end: 2)).problem == nil)
    }

    @Test func aRequestKeptByAnEarlierVersionHasNoTimeRange() throws {
        let url = URL(string: "https://cdn.example.com/a.m3u8")!
        var kept = try JSONSerialization.jsonObject(with: JSONEncoder().encode(DownloadRequest(assetId: "a", url: url, kind: .hls))) as? [String: Any]
        kept?["timeRange"] = nil
        let decoded = try JSONDecoder().decode(DownloadRequest.self, from: JSONSerialization.data(withJSONObject: kept ?? [:]))
        #expect(decoded.timeRange == nil)
        let ranged = DownloadRequest(assetId: "a", url: url, kind: .hls, timeRange: .init(start: 1.5, end: 9))
        #expect(try JSONDecoder().decode(DownloadRequest.self, from: JSONEncoder().encode(ranged)) == ranged)
    }

    /// Video in 2 s segments from 0 (90 kHz), audio in 2.048 s segments (48 kHz), 8 s.
    static let mpd = """
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT8S">
          <Period duration="PT8S">
            <AdaptationSet contentType="video">
              <Representation id="v" bandwidth="800000">
                <SegmentTemplate timescale="90000" media="v/$Number$.m4s" initialization="v/init.mp4" startNumber="1">
                  <SegmentTimeline><S t="0" d="180000" r="3"/></SegmentTimeline>
                </SegmentTemplate>
              </Representation>
            </AdaptationSet>
            <AdaptationSet contentType="audio" lang="en">
              <Representation id="a" bandwidth="64000">
                <SegmentTemplate timescale="48000" media="a/$Number$.m4s" initialization="a/init.mp4" startNumber="1">
                  <SegmentTimeline><S t="0" d="98304" r="2"/><S d="90112"/></SegmentTimeline>
                </SegmentTemplate>
              </Representation>
            </AdaptationSet>
          </Period>
        </MPD>
        """

    @Test func aDASHPresentationIsCutAndStartsAtItsFirstFrame() throws {
        let (manifest, tracks) = try DASHManifestTests.tracks(Self.mpd)
        let (cut, timing) = try DASHPlan.cut(manifest, chosen: tracks, to: MediaTimeRange(start: 2.5, end: 5), url: DASHManifestTests.url)
        let plan = DASHPlan.make(manifest, chosen: cut, timing: timing)
        // Video 2–4 s and 4–6 s; audio 2.048–4.096 s and 4.096–6.144 s.
        #expect(plan.files.map { "\($0.url.pathComponents.suffix(2).joined(separator: "/"))" } == [
            "v/init.mp4", "v/2.m4s", "v/3.m4s", "a/init.mp4", "a/2.m4s", "a/3.m4s",
        ])
        let local = try #require(plan.written.first?.text)
        // Both tracks move by the same 2 s (the earliest first segment), so they stay together.
        #expect(local.contains("presentationTimeOffset=\"180000\""), "\(local)")
        #expect(local.contains("presentationTimeOffset=\"96000\""), "\(local)")
        #expect(local.contains("<S t=\"180000\" d=\"180000\" r=\"1\"/>") && local.contains("<S t=\"98304\" d=\"98304\" r=\"1\"/>"), "\(local)")
        // The Period starts at 0 and lasts until the last segment kept ends (6.144 s − 2 s).
        #expect(local.contains("start=\"PT0.000S\"") && local.contains("duration=\"PT4.144S\""), "\(local)")
        #expect(local.contains("mediaPresentationDuration=\"PT4.144S\""), "\(local)")
        #expect(!local.contains("PT8S"), "\(local)")

        #expect(throws: DownloadFailure.self) {
            try DASHPlan.cut(manifest, chosen: tracks, to: MediaTimeRange(start: 8.5), url: DASHManifestTests.url)
        }
    }

    @Test func periodsOutsideTheRangeGoAndTheRestFollowOneAnother() throws {
        let xml = """
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT12S">
              <Period id="one" duration="PT4S"><AdaptationSet contentType="video"><Representation id="v1" bandwidth="1">
                <SegmentTemplate timescale="1000" media="p1/$Number$.m4s" duration="2000"/></Representation></AdaptationSet></Period>
              <Period id="two" duration="PT4S"><AdaptationSet contentType="video"><Representation id="v2" bandwidth="1">
                <SegmentTemplate timescale="1000" media="p2/$Number$.m4s" duration="2000"/></Representation></AdaptationSet></Period>
              <Period id="three" duration="PT4S"><AdaptationSet contentType="video"><Representation id="v3" bandwidth="1">
                <SegmentTemplate timescale="1000" media="p3/$Number$.m4s" duration="2000"/></Representation></AdaptationSet></Period>
            </MPD>
            """
        let (manifest, tracks) = try DASHManifestTests.tracks(xml)
        // 5 s to 9 s: both segments of Period two (4–6 s, 6–8 s) and the first of three (8–10 s).
        let (cut, timing) = try DASHPlan.cut(manifest, chosen: tracks, to: MediaTimeRange(start: 5, end: 9), url: DASHManifestTests.url)
        let plan = DASHPlan.make(manifest, chosen: cut, timing: timing)
        #expect(plan.files.map { "\($0.url.pathComponents.suffix(2).joined(separator: "/"))" } == ["p2/1.m4s", "p2/2.m4s", "p3/1.m4s"])
        let local = try #require(plan.written.first?.text)
        #expect(!local.contains("id=\"one\""), "\(local)")
        #expect(local.contains("<Period duration=\"PT4.000S\" id=\"two\" start=\"PT0.000S\">"), "\(local)")
        #expect(local.contains("mediaPresentationDuration=\"PT6.000S\""), "\(local)")
        #expect(timing.periods[2]?.start == 4 && timing.periods[2]?.duration == 2)
    }

    /// Subtitles in one file played whole cannot be cut: their Period keeps every track whole,
    /// so that video and subtitles stay on one timeline.
    @Test func aPeriodWithATrackThatCannotBeCutIsKeptWhole() throws {
        let xml = """
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT8S">
              <Period duration="PT8S">
                <AdaptationSet contentType="video"><Representation id="v" bandwidth="1">
                  <SegmentTemplate timescale="1000" media="v/$Number$.m4s" duration="2000"/></Representation></AdaptationSet>
                <AdaptationSet contentType="text" lang="en"><Representation id="t" bandwidth="1"><BaseURL>subs.vtt</BaseURL></Representation></AdaptationSet>
              </Period>
            </MPD>
            """
        let (manifest, tracks) = try DASHManifestTests.tracks(xml)
        #expect(tracks.map(\.track.isWholeFile) == [false, true])
        let (cut, timing) = try DASHPlan.cut(manifest, chosen: tracks, to: MediaTimeRange(start: 3, end: 5), url: DASHManifestTests.url)
        #expect(cut.map(\.track.segments.count) == [4, 1])
        #expect(cut.map(\.track.presentationTimeOffset) == [0, 0])
        #expect(timing.periods[0]?.start == 0 && timing.periods[0]?.duration == 8 && timing.total == 8)
    }
}
