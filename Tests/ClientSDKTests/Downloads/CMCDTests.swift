import ClientSDK
import Foundation
import HTTPTypes
import Testing

/// Common Media Client Data (CTA-5004) on a download's requests, as a CDN would log it: off by
/// default, and when on, each file's object type, bit rate, format, session and content id.
@Suite struct CMCDTests {
    /// The CMCD keys of a query, decoded: `key` → its value as written (`"…"` for strings, `""` for a bare key).
    static func keys(ofQuery query: String?) -> [String: String]? {
        guard let query, let item = URLComponents(string: "http://x/?\(query)")?.queryItems?.first(where: { $0.name == "CMCD" }),
            let value = item.value
        else { return nil }
        return keys(value)
    }

    static func keys(_ list: String) -> [String: String] {
        var keys: [String: String] = [:]
        for pair in list.split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            keys[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        return keys
    }

    /// Serves an HLS asset of `segments` and downloads its lowest variant with English audio.
    static func downloadShow(_ bench: DownloadBench, segments: Int) async throws {
        _ = TestHLSAsset(serving: bench.origin, segments: segments, segmentBytes: 5_000)
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "show", url: bench.origin.url("/hls/master.m3u8"), kind: .hls, maxVideoBitrate: 0, audioLanguages: ["en"],
            subtitleLanguages: []))
        #expect(try await bench.waitForOutcome("show").state == .completed)
    }

    @Test func theQueryCarriesEachFilesTypeBitRateAndTheSession() async throws {
        let bench = try await DownloadBench.start(options: { $0.cmcd = CMCDOptions() })
        try await Self.downloadShow(bench, segments: 4)

        let asked = bench.origin.asked(under: "/hls/")
        let files = asked.filter { !$0.path.hasSuffix(".m3u8") }
        let decoded = files.map { (path: $0.path, keys: Self.keys(ofQuery: $0.query)) }
        #expect(decoded.allSatisfy { $0.keys != nil }, "every file asked with CMCD: \(decoded.filter { $0.keys == nil }.map(\.path))")
        // The lowest variant (BANDWIDTH=400000, with an audio group: video alone).
        let segment = try #require(decoded.first { $0.path == "/hls/low/segments.mp4" }?.keys)
        #expect(segment["ot"] == "v" && segment["br"] == "400" && segment["sf"] == "h" && segment["st"] == "v")
        #expect(segment["cid"] == "\"show\"")
        #expect(decoded.first { $0.path == "/hls/low/init.mp4" }?.keys?["ot"] == "i")
        #expect(decoded.first { $0.path == "/hls/keys/k1.key" }?.keys?["ot"] == "k")
        let audio = try #require(decoded.first { $0.path.hasPrefix("/hls/audio/en/") }?.keys)
        #expect(audio["ot"] == "a" && audio["br"] == nil)
        // One session for the whole download, a UUID; no buffer length from a download.
        let sessions = Set(decoded.compactMap { $0.keys?["sid"] })
        #expect(sessions.count == 1 && sessions.first.map { $0.count == 38 } == true, "\(sessions)")
        #expect(decoded.allSatisfy { $0.keys?["bl"] == nil })
        // Keys in alphabetical order, as CTA-5004 asks.
        let raw = try #require(files.first { $0.path == "/hls/low/segments.mp4" }?.query)
        let value = try #require(URLComponents(string: "http://x/?\(raw)")?.queryItems?.first { $0.name == "CMCD" }?.value)
        #expect(value.split(separator: ",").map { $0.split(separator: "=")[0] } == ["br", "cid", "ot", "sf", "sid", "st"], "\(value)")
        // The playlists were asked for when the asset was queued, as they are.
        #expect(asked.filter { $0.path.hasSuffix(".m3u8") }.allSatisfy { $0.query == nil })
        await bench.stop()
    }

    @Test func headersLeaveTheURLAsItIs() async throws {
        let bench = try await DownloadBench.start(options: { $0.cmcd = CMCDOptions(transmission: .headers) })
        bench.origin.serve("/film.mp4", TestOrigin.content(40_000))
        let longId = String(repeating: "x", count: 65)
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "film", url: bench.origin.url("/film.mp4")))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: longId, url: bench.origin.url("/film.mp4?copy=2")))
        #expect(try await bench.waitForOutcome("film").state == .completed)
        #expect(try await bench.waitForOutcome(longId).state == .completed)
        let asked = bench.origin.asked(under: "/film.mp4")
        #expect(asked.count == 2 && asked.allSatisfy { $0.query == nil || $0.query == "copy=2" })
        let object = try #require(asked.first?.headers[HTTPField.Name("CMCD-Object")!])
        let session = try #require(asked.first?.headers[HTTPField.Name("CMCD-Session")!])
        #expect(object == "ot=av")
        let keys = Self.keys(session)
        #expect(keys["cid"] == "\"film\"" && keys["sf"] == "o" && keys["st"] == "v" && keys["sid"] != nil, "\(session)")
        // An id past CTA-5004's 64 characters is left out rather than cut.
        let second = try #require(asked.last?.headers[HTTPField.Name("CMCD-Session")!])
        #expect(Self.keys(second)["cid"] == nil && Self.keys(second)["sid"] != keys["sid"], "\(second)")
        await bench.stop()
    }

    @Test func nothingIsSentByDefault() async throws {
        let bench = try await DownloadBench.start()
        try await Self.downloadShow(bench, segments: 2)
        let asked = bench.origin.asked(under: "/hls/")
        #expect(!asked.isEmpty)
        #expect(asked.allSatisfy { $0.query == nil && !$0.headers.contains { $0.name.rawName.lowercased().hasPrefix("cmcd") } })
        await bench.stop()
    }
}
