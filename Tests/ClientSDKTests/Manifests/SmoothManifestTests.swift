import Foundation
import Testing
@testable import ClientSDK

/// The Smooth Streaming client manifest reader ([MS-SSTR]) on manifests written the ways
/// servers write them (`t` given or not, `d` missing before a `t`, `r` repeats, a custom
/// attribute in the URL), the choice of streams, the local manifest, a PlayReady header for the
/// license provider, and hostile manifests refused with a reason.
@Suite struct SmoothManifestTests {
    static let url = URL(string: "https://cdn.example.com/vod/film.ism/Manifest")!

    static func manifest(_ xml: String, maxFragments: Int = 100_000) throws -> SmoothManifest {
        let root: MPDElement
        do {
            root = try MPDDocument.parseXML(Data(xml.utf8))
        } catch {
            throw SmoothManifestError(error.message)
        }
        return try SmoothManifest(root: root, maxFragments: maxFragments)
    }

    static let film = """
        <?xml version="1.0" encoding="UTF-8"?>
        <SmoothStreamingMedia MajorVersion="2" MinorVersion="2" Duration="80000000">
          <StreamIndex Type="video" Name="video" Chunks="4" QualityLevels="2" Url="QualityLevels({bitrate})/Fragments(video={start time})">
            <QualityLevel Index="0" Bitrate="300000" FourCC="H264" MaxWidth="320" MaxHeight="240" CodecPrivateData="00000001674D"/>
            <QualityLevel Index="1" Bitrate="900000" FourCC="H264" MaxWidth="640" MaxHeight="480" CodecPrivateData="00000001674D"/>
            <c t="0" d="20000000" r="3"/>
            <c d="20000000"/>
          </StreamIndex>
          <StreamIndex Type="audio" Name="audio_en" Language="eng" Chunks="2" QualityLevels="1" Url="QualityLevels({bitrate},{CustomAttributes})/Fragments(audio_en={start_time})">
            <QualityLevel Index="0" Bitrate="64000" FourCC="AACL" SamplingRate="44100" Channels="2" CodecPrivateData="1210">
              <CustomAttributes><Attribute Name="lang" Value="en"/></CustomAttributes>
            </QualityLevel>
            <c t="464399"/>
            <c t="40464399"/>
          </StreamIndex>
          <StreamIndex Type="audio" Name="audio_fr" Language="fra" Chunks="1" QualityLevels="1" Url="QualityLevels({bitrate})/Fragments(audio_fr={start time})">
            <QualityLevel Index="0" Bitrate="64000" FourCC="AACL" SamplingRate="44100" Channels="2" CodecPrivateData="1210"/>
            <c t="0" d="80000000"/>
          </StreamIndex>
        </SmoothStreamingMedia>
        """

    @Test func fragmentsFollowTheirTimesDurationsAndRepeats() throws {
        let manifest = try Self.manifest(Self.film)
        #expect(manifest.timescale == 10_000_000 && manifest.duration == 80_000_000)
        let video = manifest.streams[0]
        #expect(video.kind == .video && video.qualityLevels.map(\.bitrate) == [300_000, 900_000])
        // r counts the fragment and its repeats: three, then one more after them.
        #expect(video.fragments.map(\.time) == [0, 20_000_000, 40_000_000, 60_000_000])
        // A missing d lasts to the next t, the last one to the presentation's end.
        let english = manifest.streams[1]
        #expect(english.fragments == [.init(time: 464_399, duration: 40_000_000), .init(time: 40_464_399, duration: 39_535_601)])
        #expect(english.qualityLevels[0].customAttributes == "lang=en")
    }

    @Test func theRequestChoosesAndTheLocalManifestNamesOnlyLocalFragments() throws {
        let manifest = try Self.manifest(Self.film)
        let request = DownloadRequest(assetId: "film", url: Self.url, kind: .smooth, maxVideoBitrate: 500_000, audioLanguages: ["en"])
        let choices = SmoothPlan.choose(manifest, request: request)
        #expect(choices.map(\.name) == ["video", "audio-0"])
        #expect(choices[0].level.bitrate == 300_000)
        let plan = try SmoothPlan.make(manifest, chosen: choices, url: Self.url, timeRange: nil)
        #expect(plan.files.map(\.url.absoluteString) == [
            "https://cdn.example.com/vod/film.ism/QualityLevels(300000)/Fragments(video=0)",
            "https://cdn.example.com/vod/film.ism/QualityLevels(300000)/Fragments(video=20000000)",
            "https://cdn.example.com/vod/film.ism/QualityLevels(300000)/Fragments(video=40000000)",
            "https://cdn.example.com/vod/film.ism/QualityLevels(300000)/Fragments(video=60000000)",
            "https://cdn.example.com/vod/film.ism/QualityLevels(64000,lang=en)/Fragments(audio_en=464399)",
            "https://cdn.example.com/vod/film.ism/QualityLevels(64000,lang=en)/Fragments(audio_en=40464399)",
        ])
        #expect(plan.files.map(\.relativePath) == [
            "video/0.m4s", "video/20000000.m4s", "video/40000000.m4s", "video/60000000.m4s", "audio-0/464399.m4s", "audio-0/40464399.m4s",
        ])
        #expect(plan.mainPath == "Manifest")
        // 8 s at 300 kbit/s, and 7.95 s (the English audio's fragments) at 64 kbit/s.
        #expect(plan.estimatedBytes == Int64(363_628))
        let local = try #require(plan.written.first?.text)
        let reread = try Self.manifest(local)
        #expect(reread.streams.count == 2)
        #expect(reread.streams[0].urlTemplate == "video/{start time}.m4s" && reread.streams[0].qualityLevels.map(\.bitrate) == [300_000])
        #expect(reread.streams[1].fragments == manifest.streams[1].fragments, "every fragment keeps its t and d")
        #expect(!local.contains("900000") && !local.contains("audio_fr"), "\(local)")

        // Part of it: from 3 s to 5 s on one clock, from the earliest stream's start (the
        // video's, at 0): the second and third video fragments (2–4 s, 4–6 s) and the English
        // audio's first (0.046–4.046 s) and second (4.046–8 s).
        let part = try SmoothPlan.make(manifest, chosen: choices, url: Self.url, timeRange: MediaTimeRange(start: 3, end: 5))
        #expect(part.files.map(\.relativePath) == ["video/20000000.m4s", "video/40000000.m4s", "audio-0/464399.m4s", "audio-0/40464399.m4s"])
        let partManifest = try Self.manifest(try #require(part.written.first?.text))
        // It lasts from the audio's 0.046 s to 8 s, and its Duration says so (7.95 s, not the
        // title's 8 s): a player seeks only where fragments are.
        #expect(partManifest.duration == 79_535_601)
        #expect(partManifest.streams.map(\.fragments.count) == [2, 2])
        // From 7.5 s the video's last fragment and the audio's last; past the end, nothing.
        let tail = try SmoothPlan.make(manifest, chosen: choices, url: Self.url, timeRange: MediaTimeRange(start: 7.5))
        #expect(tail.files.map(\.relativePath) == ["video/60000000.m4s", "audio-0/40464399.m4s"])
        #expect(throws: DownloadFailure.self) { try SmoothPlan.make(manifest, chosen: choices, url: Self.url, timeRange: MediaTimeRange(start: 9)) }
    }

    /// A PlayReady object (little-endian length and record count, then a rights management
    /// header record of UTF-16 XML) naming key id 9eb4050d-e44b-4802-932e-27d75083e266.
    static func playReadyObject() -> Data {
        let guid: [UInt8] = [0x0d, 0x05, 0xb4, 0x9e, 0x4b, 0xe4, 0x02, 0x48, 0x93, 0x2e, 0x27, 0xd7, 0x50, 0x83, 0xe2, 0x66]
        let header = """
            <WRMHEADER xmlns="http://schemas.microsoft.com/DRM/2007/03/PlayReadyHeader" version="4.0.0.0"><DATA>\
            <PROTECTINFO><KEYLEN>16</KEYLEN><ALGID>AESCTR</ALGID></PROTECTINFO><KID>\(Data(guid).base64EncodedString())</KID>\
            <LA_URL>https://license.example.com/rightsmanager.asmx</LA_URL></DATA></WRMHEADER>
            """
        let record = [UInt8](header.data(using: .utf16LittleEndian)!)
        var object: [UInt8] = []
        let total = UInt32(6 + 4 + record.count)
        object += withUnsafeBytes(of: total.littleEndian, Array.init)
        object += [1, 0, 1, 0]
        object += withUnsafeBytes(of: UInt16(record.count).littleEndian, Array.init)
        object += record
        return Data(object)
    }

    @Test func aPlayReadyHeaderReachesTheLicenseProviderWithItsKeyId() throws {
        let object = Self.playReadyObject()
        let xml = Self.film.replacingOccurrences(of: "Duration=\"80000000\">", with: """
            Duration="80000000"><Protection><ProtectionHeader SystemID="{9A04F079-9840-4286-AB92-E65BE0885F95}">\(object.base64EncodedString())</ProtectionHeader></Protection>
            """)
        let manifest = try Self.manifest(xml)
        let protection = try #require(manifest.protection.first)
        #expect(protection.systemId == SmoothProtection.playReadySystemId)
        #expect(protection.defaultKID == "9eb4050d-e44b-4802-932e-27d75083e266")
        let pssh = try #require(protection.pssh)
        #expect(pssh.count == 32 + object.count)
        #expect(pssh.subdata(in: 4..<8) == Data("pssh".utf8))
        #expect(pssh.subdata(in: 12..<28) == Data([0x9a, 0x04, 0xf0, 0x79, 0x98, 0x40, 0x42, 0x86, 0xab, 0x92, 0xe6, 0x5b, 0xe0, 0x88, 0x5f, 0x95]))
        #expect(pssh.suffix(object.count) == object)
        let choices = SmoothPlan.choose(manifest, request: DownloadRequest(assetId: "f", url: Self.url, kind: .smooth))
        let plan = try SmoothPlan.make(manifest, chosen: choices, url: Self.url, timeRange: nil)
        #expect(plan.contentProtection == [protection])
        #expect(try #require(plan.written.first?.text).contains("<ProtectionHeader SystemID=\"{9A04F079-9840-4286-AB92-E65BE0885F95}\">"))
        // A header that is not what PlayReady's format says gives no key id, and no crash.
        for broken in [Data(), Data([1, 2, 3]), object.prefix(20), Data([255, 255, 255, 255, 255, 255, 1, 0, 255, 255])] {
            #expect(SmoothProtection.playReadyKeyId(broken) == nil)
        }
    }

    @Test func whatCannotBeDownloadedIsRefusedWithTheReason() {
        let video = { (c: String, url: String) in
            """
            <SmoothStreamingMedia MajorVersion="2" MinorVersion="0" Duration="40000000">
              <StreamIndex Type="video" Url="\(url)"><QualityLevel Index="0" Bitrate="1"/>\(c)</StreamIndex>
            </SmoothStreamingMedia>
            """
        }
        let fragments = "QualityLevels({bitrate})/Fragments(video={start time})"
        let cases: [(String, String)] = [
            ("<MPD type=\"static\"/>", "not SmoothStreamingMedia"),
            (video("<c d=\"1\"/>", fragments).replacingOccurrences(of: "Duration=", with: "IsLive=\"TRUE\" Duration="), "live"),
            (video("<c d=\"1\"/>", "QualityLevels({bitrate})/Fragments"), "no {start time}"),
            (video("<c d=\"1\" r=\"2000000000\"/>", fragments), "budget"),
            (video("<c t=\"10\" d=\"5\"/><c t=\"12\" d=\"5\"/>", fragments), "before the last one ends"),
            (video("<c t=\"4611686018427387000\" d=\"1000\"/>", fragments), "2^62"),
            (video("<c t=\"9223372036854775000\" d=\"1000\"/>", fragments), "not an integer"),
            (video("<c d=\"0\"/>", fragments), "no duration"),
            // A missing d lasts to the next t, not to the end, when the next element has none.
            (video("<c t=\"0\"/><c d=\"20000000\"/>", fragments), "no duration"),
            (video("<c t=\"0\" r=\"3\"/>", fragments), "a repeated fragment at 0 has no d"),
            (video("<c d=\"1\"/>", String(repeating: "a", count: 5_000) + "{start time}"), "longer than 4096 bytes"),
            (video("<c d=\"-5\"/>", fragments), "not an integer"),
            (video("", fragments), "no fragments"),
            (video("<c d=\"1\"/>", fragments).replacingOccurrences(of: "<QualityLevel Index=\"0\" Bitrate=\"1\"/>", with: ""), "no QualityLevel"),
            ("<SmoothStreamingMedia MajorVersion=\"2\" MinorVersion=\"0\"/>", "no StreamIndex"),
            // Entities (and so their expansion and external ones) never reach the parser.
            ("<?xml version=\"1.0\"?><!DOCTYPE s [<!ENTITY a \"aaaa\"><!ENTITY b \"&a;&a;&a;&a;\">]><SmoothStreamingMedia>&b;</SmoothStreamingMedia>",
             "document type declaration"),
            (String(repeating: "<a>", count: 40) + String(repeating: "</a>", count: 40), "nest deeper"),
        ]
        for (xml, reason) in cases {
            do {
                _ = try Self.manifest(xml)
                Issue.record("accepted: \(xml.prefix(160))")
            } catch {
                #expect("\(error)".contains(reason), "\(error) — wanted \(reason)")
            }
        }
        // A template that resolves elsewhere than http(s) is refused when the plan is made.
        #expect(throws: DownloadFailure.self) {
            let manifest = try Self.manifest(video("<c d=\"1\"/>", "file:///etc/{start time}"))
            _ = try SmoothPlan.make(manifest, chosen: SmoothPlan.choose(manifest, request: .init(assetId: "a", url: Self.url, kind: .smooth)), url: Self.url, timeRange: nil)
        }
    }
}
