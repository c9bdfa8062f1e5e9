import Foundation
import Testing
@testable import ClientSDK

/// The HLS parser (RFC 8216) on playlists written the ways real packagers write them.
@Suite struct HLSPlaylistTests {
    let base = URL(string: "https://cdn.example.com/vod/show/master.m3u8")!

    func parse(_ text: String, url: URL? = nil) throws -> HLSPlaylist {
        try HLSPlaylist.parse(Data(text.utf8), url: url ?? base)
    }

    static let master = """
        #EXTM3U
        #EXT-X-VERSION:6
        #EXT-X-INDEPENDENT-SEGMENTS
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="English",LANGUAGE="en-US",DEFAULT=YES,AUTOSELECT=YES,URI="audio/en.m3u8"
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="Deutsch, Stereo",LANGUAGE="de",URI="audio/de.m3u8"
        #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="English",LANGUAGE="en",URI="https://subs.example.com/en.m3u8"
        #EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID="cc",NAME="CC1",INSTREAM-ID="CC1"
        #EXT-X-STREAM-INF:BANDWIDTH=2500000,AVERAGE-BANDWIDTH=2000000,CODECS="avc1.64001f,mp4a.40.2",RESOLUTION=1280x720,AUDIO="aud",SUBTITLES="subs",CLOSED-CAPTIONS="cc"
        video/720.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=800000,RESOLUTION=640x360,AUDIO="aud",SUBTITLES="subs"
        video/360.m3u8

        #EXT-X-STREAM-INF:BANDWIDTH=6000000,RESOLUTION=1920x1080,AUDIO="aud",SUBTITLES="subs"
        /absolute/1080.m3u8
        """

    @Test func aMasterPlaylistGivesVariantsAndRenditionsWithResolvedURIs() throws {
        guard case .master(let master) = try parse(Self.master) else { Issue.record("not a master playlist"); return }
        #expect(master.variants.map(\.bandwidth) == [2_500_000, 800_000, 6_000_000])
        #expect(master.variants.map(\.url.absoluteString) == [
            "https://cdn.example.com/vod/show/video/720.m3u8", "https://cdn.example.com/vod/show/video/360.m3u8",
            "https://cdn.example.com/absolute/1080.m3u8",
        ])
        #expect(master.variants[0].codecs == "avc1.64001f,mp4a.40.2")
        #expect(master.variants[0].averageBandwidth == 2_000_000)
        #expect(master.variants[0].audioGroup == "aud" && master.variants[0].subtitlesGroup == "subs")
        #expect(master.renditions.count == 4)
        #expect(master.renditions[1].name == "Deutsch, Stereo")
        #expect(master.renditions[1].url?.absoluteString == "https://cdn.example.com/vod/show/audio/de.m3u8")
        #expect(master.renditions[2].url?.absoluteString == "https://subs.example.com/en.m3u8")
        #expect(master.renditions[3].url == nil)
        #expect(master.renditions[0].isDefault && !master.renditions[1].isDefault)
    }

    @Test func theVariantIsTheHighestNotAboveTheLimitOrTheLowest() throws {
        guard case .master(let master) = try parse(Self.master) else { Issue.record("not a master playlist"); return }
        #expect(master.variant(maxBitrate: nil).bandwidth == 6_000_000)
        #expect(master.variant(maxBitrate: 0).bandwidth == 800_000)
        #expect(master.variant(maxBitrate: 100).bandwidth == 800_000)
        #expect(master.variant(maxBitrate: 2_500_000).bandwidth == 2_500_000)
        #expect(master.variant(maxBitrate: 5_999_999).bandwidth == 2_500_000)
        #expect(master.variant(maxBitrate: .max).bandwidth == 6_000_000)
    }

    @Test func renditionsAreChosenByLanguageList() throws {
        guard case .master(let master) = try parse(Self.master) else { Issue.record("not a master playlist"); return }
        #expect(master.renditions(.audio, group: "aud", languages: nil).map(\.name) == ["English", "Deutsch, Stereo"])
        #expect(master.renditions(.audio, group: "aud", languages: []).isEmpty)
        #expect(master.renditions(.audio, group: "aud", languages: ["EN"]).map(\.name) == ["English"])
        #expect(master.renditions(.audio, group: "aud", languages: ["de", "fr"]).map(\.name) == ["Deutsch, Stereo"])
        #expect(master.renditions(.subtitles, group: "subs", languages: ["en"]).count == 1)
        #expect(master.renditions(.audio, group: nil, languages: nil).isEmpty)
    }

    @Test func aMediaPlaylistGivesSegmentsWithRangesKeysAndInitSections() throws {
        let text = """
            #EXTM3U
            #EXT-X-VERSION:7
            #EXT-X-TARGETDURATION:6
            #EXT-X-MEDIA-SEQUENCE:100
            #EXT-X-PLAYLIST-TYPE:VOD
            #EXT-X-MAP:URI="init.mp4",BYTERANGE="720@0"
            #EXT-X-KEY:METHOD=AES-128,URI="https://keys.example.com/k1",IV=0x000102030405060708090A0B0C0D0E0F
            #EXTINF:6.006,
            #EXT-X-BYTERANGE:1000@720
            main.mp4
            #EXTINF:6.006,title with, a comma
            #EXT-X-BYTERANGE:2000
            main.mp4
            #EXT-X-KEY:METHOD=NONE
            #EXTINF:3.5,
            seg/3.ts?token=a%20b
            #EXT-X-ENDLIST
            """
        guard case .media(let media) = try parse(text, url: URL(string: "https://cdn.example.com/vod/show/video/720.m3u8")!) else {
            Issue.record("not a media playlist")
            return
        }
        #expect(media.isComplete)
        #expect(media.targetDuration == 6)
        #expect(media.segments.map(\.sequence) == [100, 101, 102])
        #expect(abs(media.duration - 15.512) < 0.0001)
        #expect(media.segments[0].byteRange == .init(length: 1000, offset: 720))
        #expect(media.segments[0].byteRange?.httpRange == "bytes=720-1719")
        // No offset: it follows the previous range in the same file.
        #expect(media.segments[1].byteRange == .init(length: 2000, offset: 1720))
        #expect(media.segments[2].byteRange == nil)
        #expect(media.segments[0].initSection == .init(url: URL(string: "https://cdn.example.com/vod/show/video/init.mp4")!, byteRange: .init(length: 720, offset: 0)))
        #expect(media.segments[0].key?.method == .aes128)
        #expect(media.segments[0].key?.isDownloadable == true)
        #expect(media.segments[0].key?.url?.absoluteString == "https://keys.example.com/k1")
        #expect(media.segments[0].key?.iv == "0x000102030405060708090A0B0C0D0E0F")
        #expect(media.segments[2].key == nil)
        #expect(media.segments[2].url.absoluteString == "https://cdn.example.com/vod/show/video/seg/3.ts?token=a%20b")
    }

    @Test func aKeyInAnotherFormatIsLeftToTheLicenseProvider() throws {
        let text = """
            #EXTM3U
            #EXT-X-TARGETDURATION:4
            #EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://asset-1",KEYFORMAT="com.apple.streamingkeydelivery"
            #EXTINF:4,
            a.ts
            #EXT-X-ENDLIST
            """
        guard case .media(let fairPlay) = try parse(text) else { Issue.record("not a media playlist"); return }
        #expect(fairPlay.segments[0].key?.method == .sampleAES)
        #expect(fairPlay.segments[0].key?.url?.absoluteString == "skd://asset-1")
        #expect(fairPlay.segments[0].key?.isDownloadable == false)
        // An identity key must be fetchable over http(s).
        let local = text.replacingOccurrences(of: ",KEYFORMAT=\"com.apple.streamingkeydelivery\"", with: "")
        #expect(throws: HLSPlaylistError.self) { try parse(local) }
    }

    /// Shaka Packager's cbcs HLS: `SAMPLE-AES` with the key id in a `data:` URI, identity format.
    @Test func aKeyIdInADataURIReachesTheLicenseProviderAndTheLocalPlaylistKeepsIt() throws {
        let kid = Data([0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef])
        let uri = "data:text/plain;base64,\(kid.base64EncodedString())"
        let text = """
            #EXTM3U
            #EXT-X-TARGETDURATION:2
            #EXT-X-KEY:METHOD=SAMPLE-AES,URI="\(uri)",KEYFORMAT="identity"
            #EXT-X-MAP:URI="init.mp4"
            #EXTINF:2,
            1.m4s
            #EXTINF:2,
            2.m4s
            #EXT-X-ENDLIST
            """
        guard case .media(let media) = try parse(text) else { Issue.record("not a media playlist"); return }
        let key = try #require(media.segments[0].key)
        #expect(key.keyId == kid && !key.isDownloadable && key.url == nil)
        #expect(media.segments[0].initSection?.key?.keyId == kid, "the map stands after the key: it is encrypted too")
        let plan = try HLSPlan.make(master: nil, streams: [(HLSPlan.Stream(name: "video", url: base, bandwidth: nil), media)])
        #expect(plan.keyIds == [kid])
        #expect(!plan.files.contains { $0.relativePath.hasPrefix("keys/") }, "a key id is not a file to fetch")
        let local = try #require(plan.written.first?.text)
        #expect(local.contains("#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"\(uri)\",KEYFORMAT=\"identity\""), "\(local)")

        // SAMPLE-AES-CTR (CENC in HLS) too; a data: URI of another length is refused, not guessed at.
        let ctr = text.replacingOccurrences(of: "METHOD=SAMPLE-AES,", with: "METHOD=SAMPLE-AES-CTR,")
        guard case .media(let ctrMedia) = try parse(ctr) else { Issue.record("not a media playlist"); return }
        #expect(ctrMedia.segments[0].key?.method == .other("SAMPLE-AES-CTR") && ctrMedia.segments[0].key?.keyId == kid)
        for bad in ["data:text/plain;base64,AAAA", "data:text/plain,0123", "data:;base64,!!!!"] {
            #expect(throws: HLSPlaylistError.self, "\(bad)") { try parse(text.replacingOccurrences(of: uri, with: bad)) }
        }
    }

    @Test func aLivePlaylistParsesButSaysItIsNotComplete() throws {
        let text = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4,\na.ts\n#EXTINF:4,\nb.ts\n"
        guard case .media(let media) = try parse(text) else { Issue.record("not a media playlist"); return }
        #expect(!media.isComplete)
        #expect(media.segments.count == 2)
    }

    @Test func whatCannotBeDownloadedIsRefusedWithTheReason() {
        let cases: [(String, String, HLSPlaylistError)] = [
            ("html", "<!DOCTYPE html><html><body>Sign in to the Wi-Fi</body></html>", .notAPlaylist("it does not begin with #EXTM3U")),
            ("empty", "", .notAPlaylist("it does not begin with #EXTM3U")),
            ("variant without URI", "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n", .malformed(line: "#EXT-X-STREAM-INF:BANDWIDTH=1", "a variant stream has no URI")),
            ("variant without bandwidth", "#EXTM3U\n#EXT-X-STREAM-INF:RESOLUTION=1x1\na.m3u8", .malformed(line: "#EXT-X-STREAM-INF:RESOLUTION=1x1", "a variant stream has no BANDWIDTH")),
            ("negative bandwidth", "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=-5\na.m3u8", .malformed(line: "#EXT-X-STREAM-INF:BANDWIDTH=-5", "BANDWIDTH is not a non-negative integer")),
            ("unclosed quote", "#EXTM3U\n#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a,NAME=x\n", .malformed(line: "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a,NAME=x", "a quoted attribute value that is not closed")),
            ("uri without extinf", "#EXTM3U\n#EXT-X-TARGETDURATION:4\na.ts\n", .malformed(line: "a.ts", "a URI without #EXTINF")),
            ("no target duration", "#EXTM3U\n#EXTINF:4,\na.ts\n#EXT-X-ENDLIST", .malformed(line: nil, "a media playlist without #EXT-X-TARGETDURATION")),
            ("bad duration", "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:nan,\na.ts", .malformed(line: "#EXTINF:nan,", "a segment duration that is not a number of seconds")),
            ("implicit offset in another file", "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4,\n#EXT-X-BYTERANGE:10@0\na.mp4\n#EXTINF:4,\n#EXT-X-BYTERANGE:10\nb.mp4", .malformed(line: "b.mp4", "a byte range without offset that does not follow one in the same file")),
            ("huge offset", "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4,\n#EXT-X-BYTERANGE:10@9223372036854775807\na.mp4", .malformed(line: "#EXT-X-BYTERANGE:10@9223372036854775807", "a byte range offset that is not a non-negative integer")),
            ("non-http segment", "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4,\nfile:///etc/passwd", .malformed(line: "file:///etc/passwd", "a URI that is not http(s)")),
            ("both kinds", "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\na.m3u8\n#EXTINF:4,\na.ts", .malformed(line: nil, "it has both variant streams and media segments")),
        ]
        for (name, text, expected) in cases {
            #expect(throws: expected, "\(name)") { try parse(text) }
        }
        #expect(throws: HLSPlaylistError.notAPlaylist("it is not UTF-8 text")) { try HLSPlaylist.parse(Data([0x23, 0xFF, 0xFE]), url: base) }
        #expect(throws: HLSPlaylistError.tooLarge(HLSPlaylist.maxBytes)) {
            try HLSPlaylist.parse(Data(count: HLSPlaylist.maxBytes + 1), url: base)
        }
    }
}
