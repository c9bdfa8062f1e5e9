import Foundation
import Testing
@testable import ClientSDK

/// The DASH MPD reader on manifests written the ways packagers write them (hand-written here:
/// several Periods, `BaseURL` at every level, `SegmentList`, `r="-1"`, `$Time$`), the choice of
/// Representations, the local MPD, and hostile manifests refused with a reason.
@Suite struct DASHManifestTests {
    static let url = URL(string: "https://cdn.example.com/vod/show/manifest.mpd")!

    static func manifest(_ xml: String) throws -> DASHManifest {
        try DASHManifest(root: try MPDDocument.parse(Data(xml.utf8)), url: url)
    }

    /// The tracks the request chooses, in choice order.
    static func tracks(_ xml: String, request: DownloadRequest = .init(assetId: "a", url: url, kind: .dash), maxSegments: Int = 100_000)
        throws -> (DASHManifest, [(choice: DASHPlan.Choice, track: DASHTrack)])
    {
        let manifest = try manifest(xml)
        let tracks = try DASHPlan.choose(manifest, request: request).map { choice throws in
            guard case .track(let track) = try DASHSegments.track(choice.representation, period: manifest.periods[choice.period], maxSegments: maxSegments) else {
                throw MPDError("an index to fetch")
            }
            return (choice, track)
        }
        return (manifest, tracks)
    }

    static func error(_ xml: String, maxSegments: Int = 100_000) -> String? {
        do {
            _ = try tracks(xml, maxSegments: maxSegments)
            return nil
        } catch {
            return "\(error)"
        }
    }

    /// Two Periods; BaseURLs at the MPD, Period, AdaptationSet and Representation levels; a
    /// `$Number%05d$` template with a fixed duration over a Period of 10 s, then a `SegmentList`
    /// with byte ranges of one file; audio in three languages written three ways.
    static let twoPeriods = """
        <?xml version="1.0" encoding="UTF-8"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT18S" minBufferTime="PT2S"
             profiles="urn:mpeg:dash:profile:isoff-on-demand:2011">
          <BaseURL>https://media.example.net/root/</BaseURL>
          <Period id="one" duration="PT10S">
            <BaseURL>p1/</BaseURL>
            <AdaptationSet contentType="video" mimeType="video/mp4">
              <BaseURL>video/</BaseURL>
              <SegmentTemplate timescale="1000" duration="4000" startNumber="7" initialization="$RepresentationID$/init.mp4"
                               media="$RepresentationID$/seg-$Number%05d$-$Bandwidth$.m4s"/>
              <Representation id="low" bandwidth="500000" width="640" height="360"/>
              <Representation id="high" bandwidth="3000000" width="1920" height="1080">
                <BaseURL>https://other.example.org/hd/</BaseURL>
              </Representation>
              <Representation id="mid" bandwidth="1500000" width="1280" height="720"/>
            </AdaptationSet>
            <AdaptationSet contentType="audio" lang="fra" mimeType="audio/mp4">
              <Role schemeIdUri="urn:mpeg:dash:role:2011" value="main"/>
              <SegmentTemplate timescale="48000" duration="192000" media="fra-$Number$.m4s" initialization="fra-init.mp4"/>
              <Representation id="a-fra" bandwidth="128000"/>
            </AdaptationSet>
            <AdaptationSet contentType="audio" lang="fr-CA" mimeType="audio/mp4">
              <SegmentTemplate timescale="48000" duration="192000" media="frca-$Number$.m4s"/>
              <Representation id="a-frca" bandwidth="96000"/>
            </AdaptationSet>
            <AdaptationSet contentType="audio" lang="ger" mimeType="audio/mp4">
              <SegmentTemplate timescale="48000" duration="192000" media="ger-$Number$.m4s"/>
              <Representation id="a-ger" bandwidth="96000"/>
            </AdaptationSet>
            <AdaptationSet mimeType="text/vtt" lang="fre">
              <Representation id="subs-fr" bandwidth="1000"><BaseURL>subs/fr.vtt</BaseURL></Representation>
            </AdaptationSet>
          </Period>
          <Period id="two">
            <AdaptationSet mimeType="video/mp4">
              <Representation id="only" bandwidth="800000">
                <BaseURL>p2/all.mp4</BaseURL>
                <SegmentList timescale="90000" duration="360000">
                  <Initialization range="0-999"/>
                  <SegmentURL mediaRange="1000-50999"/>
                  <SegmentURL mediaRange="51000-99999"/>
                </SegmentList>
              </Representation>
            </AdaptationSet>
          </Period>
        </MPD>
        """

    @Test func periodsBaseURLsAtEveryLevelAndANumberTemplateWithAWidth() throws {
        let (manifest, tracks) = try Self.tracks(Self.twoPeriods, request: .init(
            assetId: "a", url: Self.url, kind: .dash, maxVideoBitrate: 2_000_000, audioLanguages: ["fr"], subtitleLanguages: ["fr"]))
        #expect(manifest.periods.map(\.start) == [0, 10])
        #expect(manifest.periods.map(\.duration) == [10, 8])
        #expect(tracks.map(\.choice.name) == ["period-0/video", "period-0/audio-0", "period-0/audio-1", "period-0/text-0", "period-1/video"])
        // The highest video under 2 Mbit/s; audio in `fra` and `fr-CA` but not `ger`; text in `fre`.
        #expect(tracks[0].choice.representation.id == "mid")
        #expect(tracks.map(\.choice.representation.id) == ["mid", "a-fra", "a-frca", "subs-fr", "only"])
        let video = tracks[0].track
        #expect(video.initialization?.url.absoluteString == "https://media.example.net/root/p1/video/mid/init.mp4")
        // 10 s in 4 s segments: three, the last 2 s, numbered from 7.
        #expect(video.segments.map(\.url.absoluteString) == [
            "https://media.example.net/root/p1/video/mid/seg-00007-1500000.m4s",
            "https://media.example.net/root/p1/video/mid/seg-00008-1500000.m4s",
            "https://media.example.net/root/p1/video/mid/seg-00009-1500000.m4s",
        ])
        #expect(video.segments.map(\.duration) == [4000, 4000, 2000])
        #expect(tracks[3].track.isWholeFile && tracks[3].track.segments.map(\.url.absoluteString) == ["https://media.example.net/root/p1/subs/fr.vtt"])
        let list = tracks[4].track
        #expect(list.initialization?.byteRange == .init(length: 1000, offset: 0))
        #expect(list.segments.map(\.byteRange) == [.init(length: 50_000, offset: 1000), .init(length: 49_000, offset: 51_000)])
        #expect(list.segments.allSatisfy { $0.url.absoluteString == "https://media.example.net/root/p2/all.mp4" })
        #expect(list.segments.map(\.time) == [0, 360_000])

        // A Representation's own BaseURL replaces the levels above when it is absolute.
        let (_, highest) = try Self.tracks(Self.twoPeriods, request: .init(assetId: "a", url: Self.url, kind: .dash, audioLanguages: [], subtitleLanguages: []))
        #expect(highest.map(\.choice.representation.id) == ["high", "only"])
        #expect(highest[0].track.segments[0].url.absoluteString == "https://other.example.org/hd/high/seg-00007-3000000.m4s")
        // 0 picks the lowest.
        let (_, lowest) = try Self.tracks(Self.twoPeriods, request: .init(assetId: "a", url: Self.url, kind: .dash, maxVideoBitrate: 0, audioLanguages: ["de"]))
        #expect(lowest.map(\.choice.representation.id) == ["low", "a-ger", "subs-fr", "only"])
    }

    @Test func theLocalManifestNamesOnlyTheChosenRepresentationsAndLocalFiles() throws {
        let (manifest, tracks) = try Self.tracks(Self.twoPeriods, request: .init(
            assetId: "a", url: Self.url, kind: .dash, maxVideoBitrate: 0, audioLanguages: ["fr-CA"], subtitleLanguages: []))
        let plan = DASHPlan.make(manifest, chosen: tracks)
        let local = try #require(plan.written.first { $0.path == "index.mpd" }?.text)
        #expect(!local.contains("http"), "\(local)")
        #expect(!local.contains("BaseURL>p") && !local.contains("mediaRange"))
        #expect(local.contains("id=\"low\"") && !local.contains("id=\"mid\"") && !local.contains("id=\"high\""))
        #expect(local.contains("id=\"a-frca\"") && !local.contains("id=\"a-fra\"") && !local.contains("subs-fr"))
        #expect(local.contains("media=\"period-0/video/$Number$.m4s\"") && local.contains("initialization=\"period-0/video/init.mp4\""))
        #expect(local.contains("<S t=\"0\" d=\"4000\" r=\"1\"/>") && local.contains("<S t=\"8000\" d=\"2000\"/>"))
        #expect(local.contains("<Role schemeIdUri=\"urn:mpeg:dash:role:2011\" value=\"main\"/>") == false, "the Role is on the fra set, not chosen")
        #expect(local.contains("type=\"static\"") && local.contains("mediaPresentationDuration=\"PT18S\""))
        // Every file the local manifest names is in the plan.
        #expect(local.contains("media=\"period-1/video/$Number$.mp4\""))
        #expect(plan.files.first { $0.relativePath == "period-1/video/2.mp4" }?.byteRange == .init(length: 49_000, offset: 51_000))
        // The local manifest reads back as a manifest naming the same number of segments.
        let again = try DASHManifest(root: try MPDDocument.parse(Data(local.utf8)), url: URL(string: "http://127.0.0.1/asset/index.mpd")!)
        #expect(again.periods.count == 2)
        // Bandwidth × duration: 500 kbit/s × 10 s + 96 kbit/s × 10 s + 800 kbit/s × 8 s.
        let expected: Int64 = 62_500 * 10 + 12_000 * 10 + 100_000 * 8
        #expect(plan.estimatedBytes == expected)
    }

    static func timeline(_ entries: String, period: String = " duration=\"PT10S\"", extra: String = "") -> String {
        """
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static">
          <Period\(period)>
            <AdaptationSet contentType="video">
              <Representation id="v" bandwidth="1000000">
                <SegmentTemplate timescale="1000" media="v/$Time$.m4s" initialization="v/init.mp4"\(extra)>
                  <SegmentTimeline>\(entries)</SegmentTimeline>
                </SegmentTemplate>
              </Representation>
            </AdaptationSet>
          </Period>
        </MPD>
        """
    }

    @Test func aTimelineRepeatsToTheNextEntryOrThePeriodsEndAndNamesSegmentsByTime() throws {
        let (_, tracks) = try Self.tracks(Self.timeline("<S t=\"5000\" d=\"2000\" r=\"-1\"/><S t=\"11000\" d=\"1500\" r=\"-1\"/>", extra: " presentationTimeOffset=\"5000\""))
        let segments = tracks[0].track.segments
        // From 5 s to 11 s in 2 s steps, then to the Period's end (5 s + 10 s) in 1.5 s steps.
        #expect(segments.map(\.time) == [5000, 7000, 9000, 11000, 12500, 14000])
        #expect(segments.map(\.url.lastPathComponent) == ["5000.m4s", "7000.m4s", "9000.m4s", "11000.m4s", "12500.m4s", "14000.m4s"])
        #expect(tracks[0].track.presentationTimeOffset == 5000)
    }

    @Test func hostileManifestsAreRefusedWithAReason() throws {
        let cases: [(String, String)] = [
            // Entity expansion ("billion laughs") and external entities: no DTD at all.
            ("""
             <?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>
             <MPD type="static"><Period>&lol2;</Period></MPD>
             """, "document type declaration"),
            ("<?xml version=\"1.0\"?><!DOCTYPE MPD SYSTEM \"file:///etc/passwd\"><MPD/>", "document type declaration"),
            ("<html><body>captive portal</body></html>", "not MPD"),
            // A processing instruction without data crashed FoundationXML (found by the fuzzer).
            ("<?xm?>\n<MPD type=\"static\"><Period/></MPD>", "processing instruction"),
            ("<?xml version=\"1.0\"?><?x?><MPD type=\"static\"><Period/></MPD>", "processing instruction"),
            ("<MPD type=\"static\"><Period>", "not well-formed"),
            ("<MPD type=\"dynamic\"><Period/></MPD>", "live"),
            (Self.timeline("<S d=\"2000\" r=\"-1\"/>", period: ""), "unknown length"),
            (Self.timeline("<S d=\"1\" r=\"1000000000000\"/>"), "budget"),
            (Self.timeline("<S d=\"99999999999999999999999\"/>"), "S@d"),
            (Self.timeline("<S t=\"4611686018427387000\" d=\"1000\" r=\"5\"/>"), "2^62"),
            (Self.timeline("<S d=\"0\"/>"), "d is 0"),
            (Self.timeline("<S d=\"1000\" r=\"-2\"/>"), "S@r"),
            (Self.timeline("<S d=\"1000\"/>").replacingOccurrences(of: "timescale=\"1000\"", with: "timescale=\"0\""), "timescale"),
            (Self.timeline("<S d=\"1000\"/>", period: " duration=\"P99999Y\""), "duration"),
            (Self.timeline("<S d=\"1000\"/>", period: " duration=\"PT1e308S\""), "duration"),
            (Self.timeline("<S d=\"1000\"/>").replacingOccurrences(of: "$Time$", with: "$Number%0999999d$"), "width"),
            (Self.timeline("<S d=\"1000\"/>").replacingOccurrences(of: "$Time$", with: "$SubNumber$"), "does not know"),
            (Self.timeline("<S d=\"1000\"/>").replacingOccurrences(of: "$Time$", with: "$Time"), "not closed"),
            (Self.timeline("<S d=\"1000\"/>").replacingOccurrences(of: "v/$Time$.m4s", with: "file:///etc/passwd"), "not an http(s) URL"),
            ("<MPD type=\"static\">" + String(repeating: "<a>", count: 40) + String(repeating: "</a>", count: 40) + "</MPD>", "nest deeper"),
            // An index range at the end of what 64 bits address: its sidx's offsets would overflow.
            ("""
             <MPD type="static" mediaPresentationDuration="PT4S"><Period><AdaptationSet contentType="video"><Representation id="v" bandwidth="1">
             <BaseURL>v.mp4</BaseURL><SegmentBase indexRange="9223372036854775000-9223372036854775099"/></Representation></AdaptationSet></Period></MPD>
             """, "below 2^62"),
        ]
        for (xml, reason) in cases {
            let error = try #require(Self.error(xml), "accepted: \(xml.prefix(120))")
            #expect(error.contains(reason), "\(error) — wanted \(reason)")
        }
        // The segment budget holds for a template of fixed durations too.
        let long = Self.timeline("<S d=\"1000\"/>").replacingOccurrences(of: "<SegmentTimeline><S d=\"1000\"/></SegmentTimeline>", with: "")
            .replacingOccurrences(of: "timescale=\"1000\"", with: "timescale=\"1000\" duration=\"1\"")
        #expect(Self.error(long, maxSegments: 5_000)?.contains("budget") == true)
        // Too many elements.
        let many = "<MPD type=\"static\">" + String(repeating: "<x/>", count: MPDDocument.maxElements) + "</MPD>"
        #expect(Self.error(many)?.contains("elements") == true)
    }

    @Test func aSegmentIndexGivesEachSegmentsRangeAndRefusesBoxesThatLie() throws {
        func box(_ type: String, _ body: [UInt8]) -> [UInt8] {
            let size = UInt32(8 + body.count)
            return [UInt8(size >> 24), UInt8(size >> 16 & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size & 0xFF)] + Array(type.utf8) + body
        }
        func be32(_ value: UInt32) -> [UInt8] { [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
        // Version 0: reference_ID, timescale 1000, earliest 0, first_offset 10, two references.
        var body: [UInt8] = [0, 0, 0, 0] + be32(1) + be32(1000) + be32(0) + be32(10) + [0, 0, 0, 2]
        body += be32(5000) + be32(2000) + be32(0x9000_0000)
        body += be32(7000) + be32(1500) + be32(0x9000_0000)
        let sidx = box("sidx", body)
        // The index range starts at 817 in the file; the box is 56 bytes, so segments start at 817 + 56 + 10.
        let index = try SegmentIndex.parse(Data(sidx), at: 817, maxReferences: 100)
        #expect(index.references == [
            .init(range: .init(length: 5000, offset: 883), duration: 2000), .init(range: .init(length: 7000, offset: 5883), duration: 1500),
        ])
        // Claims two references but holds one; claims more bytes than the range; references another sidx.
        #expect(throws: MPDError.self) { try SegmentIndex.parse(Data(sidx.dropLast(12)), at: 0, maxReferences: 100) }
        var lying = sidx
        lying[3] = 200
        #expect(throws: MPDError.self) { try SegmentIndex.parse(Data(lying), at: 0, maxReferences: 100) }
        var hierarchical = sidx
        hierarchical[8 + 24] |= 0x80
        #expect(throws: MPDError.self) { try SegmentIndex.parse(Data(hierarchical), at: 0, maxReferences: 100) }
        #expect(throws: MPDError.self) { try SegmentIndex.parse(Data(sidx), at: 0, maxReferences: 1) }
        // Offsets past 2^63 from where the index lies: refused, not trapped.
        #expect(throws: MPDError.self) { try SegmentIndex.parse(Data(sidx), at: Int64.max - 60, maxReferences: 100) }
        #expect(throws: MPDError.self) { try SegmentIndex.parse(Data(sidx), at: Int64.max - 6000, maxReferences: 100) }
        #expect(throws: MPDError.self) { try SegmentIndex.parse(Data(box("free", [1, 2, 3])), at: 0, maxReferences: 100) }
    }

    @Test func languagesMatchInEveryFormManifestsWriteThem() {
        for tag in ["fr", "FR", "fr-FR", "fra", "fre", "fre-CA", "fr_BE"] {
            #expect(LanguageCodes.matches(tag, anyOf: ["fr"]), "\(tag)")
        }
        for tag in ["fy", "frr", "en", "", "de-FR"] {
            #expect(!LanguageCodes.matches(tag, anyOf: ["fr"]), "\(tag)")
        }
        #expect(LanguageCodes.matches("ger", anyOf: ["de"]) && LanguageCodes.matches("de", anyOf: ["deu"]) && LanguageCodes.matches("zho", anyOf: ["chi"]))
        #expect(LanguageCodes.matches("fr-CA", anyOf: ["fra-ca"]) && !LanguageCodes.matches("fr", anyOf: ["fr-CA"]))
        #expect(!LanguageCodes.matches("fr", anyOf: [""]))
    }

    @Test func contentProtectionIsKeptForThePlayerAndGivenToTheLicenseProvider() throws {
        let pssh = Data([0, 0, 0, 32, 0x70, 0x73, 0x73, 0x68] + [UInt8](repeating: 7, count: 24))
        let xml = """
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" xmlns:cenc="urn:mpeg:cenc:2013" type="static" mediaPresentationDuration="PT4S">
              <Period>
                <AdaptationSet contentType="video">
                  <ContentProtection schemeIdUri="urn:mpeg:dash:mp4protection:2011" value="cenc" cenc:default_KID="10000000-1000-1000-1000-100000000001"/>
                  <ContentProtection schemeIdUri="urn:uuid:EDEF8BA9-79D6-4ACE-A3C8-27DCD51D21ED">
                    <cenc:pssh>\(pssh.base64EncodedString())</cenc:pssh>
                  </ContentProtection>
                  <SegmentTemplate timescale="1" duration="2" media="v$Number$.m4s" initialization="init.mp4"/>
                  <Representation id="v" bandwidth="100"/>
                </AdaptationSet>
              </Period>
            </MPD>
            """
        let (manifest, tracks) = try Self.tracks(xml)
        let plan = DASHPlan.make(manifest, chosen: tracks)
        #expect(plan.contentProtection == [
            ContentProtection(schemeIdUri: "urn:mpeg:dash:mp4protection:2011", value: "cenc", defaultKID: "10000000-1000-1000-1000-100000000001"),
            ContentProtection(schemeIdUri: "urn:uuid:EDEF8BA9-79D6-4ACE-A3C8-27DCD51D21ED", pssh: pssh),
        ])
        #expect(plan.contentProtection?[1].systemId == "edef8ba9-79d6-4ace-a3c8-27dcd51d21ed")
        let local = try #require(plan.written.first?.text)
        #expect(local.contains("xmlns:cenc=\"urn:mpeg:cenc:2013\""))
        #expect(local.contains("cenc:default_KID=\"10000000-1000-1000-1000-100000000001\""))
        #expect(local.contains("<cenc:pssh>\(pssh.base64EncodedString())</cenc:pssh>"))
    }
}
