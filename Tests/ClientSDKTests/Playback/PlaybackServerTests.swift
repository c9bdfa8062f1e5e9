import AsyncHTTPClient
import Backplane
import ClientSDK
import Foundation
import NIOCore
import NIOHTTP1
import Testing
import TestSupport

/// The loopback playback server (`engine.playback`), spoken to over real HTTP: every file of a
/// downloaded HLS asset byte for byte under the token, ranges as players ask for them, the
/// types they need, nothing outside the token, and rights kept at the door.
@Suite struct PlaybackServerTests {
    struct Answer {
        var status: UInt
        var headers: HTTPHeaders
        var body: Data
    }

    static func get(_ url: URL, method: HTTPMethod = .GET, range: String? = nil) async throws -> Answer {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = method
        if let range { request.headers.add(name: "Range", value: range) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(15))
        let body = try await response.body.collect(upTo: 64 << 20)
        return Answer(status: response.status.code, headers: response.headers, body: Data(buffer: body))
    }

    @Test func everyFileOfADownloadedHLSAssetIsServedUnderTheTokenWithRangesAndTypes() async throws {
        let bench = try await DownloadBench.start()
        _ = TestHLSAsset(serving: bench.origin)
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "show/1", url: bench.origin.url("/hls/master.m3u8"), kind: .hls, allowedMIMETypes: TestHLSAsset.mediaTypes,
            maxVideoBitrate: 1_500_000, audioLanguages: ["en"]))
        let asset = try await bench.waitForOutcome("show/1")
        #expect(asset.state == .completed)
        let index = try #require(asset.localURL)
        let directory = index.deletingLastPathComponent()

        let url = try await bench.engine.playback.url(for: "show/1")
        #expect(url.host == "127.0.0.1" && url.lastPathComponent == "index.m3u8")
        #expect(url.absoluteString.contains("/show%2F1/"), "the asset id is one path segment: \(url.absoluteString)")
        let base = url.deletingLastPathComponent()
        let master = try await Self.get(url)
        #expect(master.status == 200)
        #expect(master.headers.first(name: "Content-Type") == "application/vnd.apple.mpegurl")
        #expect(master.body == (try Data(contentsOf: index)))

        let tree = try LocalPlaylistTree(index: index)
        var types: [String: String] = [:]
        for path in Set(tree.allReferences) {
            let answer = try await Self.get(base.appendingPathComponent(path))
            #expect(answer.status == 200, "\(path)")
            // A key lies sealed on disk, and is served opened: the origin's 16 bytes.
            let expected = path.hasSuffix(".key") ? bench.origin.bytes(at: "/hls/keys/k1.key") : try Data(contentsOf: directory.appendingPathComponent(path))
            #expect(answer.body == expected, "\(path)")
            types[(path as NSString).pathExtension] = answer.headers.first(name: "Content-Type")
        }
        #expect(types["m3u8"] == "application/vnd.apple.mpegurl")
        #expect(types["key"] == "application/octet-stream")
        #expect(types["mp4"] == "video/mp4")
        #expect(types["vtt"] == "text/vtt")

        // Ranges, as players ask for them on fMP4 and byte-range segments.
        let segmentPath = try #require(tree.allReferences.first { $0.hasSuffix(".mp4") && !$0.contains("init-") })
        let segmentURL = base.appendingPathComponent(segmentPath)
        let whole = try Data(contentsOf: directory.appendingPathComponent(segmentPath))
        let middle = try await Self.get(segmentURL, range: "bytes=10-19")
        #expect(middle.status == 206 && middle.body == whole[10..<20])
        #expect(middle.headers.first(name: "Content-Range") == "bytes 10-19/\(whole.count)")
        let tail = try await Self.get(segmentURL, range: "bytes=-7")
        #expect(tail.status == 206 && tail.body == whole.suffix(7))
        let open = try await Self.get(segmentURL, range: "bytes=\(whole.count - 3)-")
        #expect(open.status == 206 && open.body == whole.suffix(3))
        for refused in ["bytes=0-1,4-5", "bytes=\(whole.count)-", "bytes=5-2", "bytes=x-y"] {
            let answer = try await Self.get(segmentURL, range: refused)
            #expect(answer.status == 416, "\(refused)")
            #expect(answer.headers.first(name: "Content-Range") == "bytes */\(whole.count)", "\(refused)")
        }
        let head = try await Self.get(segmentURL, method: .HEAD)
        #expect(head.status == 200 && head.body.isEmpty && head.headers.first(name: "Content-Length") == String(whole.count))
        #expect(try await Self.get(segmentURL, method: .POST).status == 405)
        // A web view's page is of another origin: it may read the answers, and its preflight is answered.
        #expect(head.headers.first(name: "Access-Control-Allow-Origin") == "*")
        #expect(head.headers.first(name: "Access-Control-Expose-Headers")?.contains("Content-Range") == true)
        let preflight = try await Self.get(segmentURL, method: .OPTIONS)
        #expect(preflight.status == 204 && preflight.headers.first(name: "Access-Control-Allow-Headers")?.contains("Range") == true)

        // Nothing answers outside the token, or outside the asset's directory.
        let server = try #require(URLComponents(url: url, resolvingAgainstBaseURL: false))
        let token = try #require(url.pathComponents.dropFirst().first)
        for path in [
            "/not-the-token/show%2F1/index.m3u8", "/\(token)/show%2F1/..%2F..%2Fbackplane-sdk.sqlite", "/\(token)/show%2F1/../index.m3u8",
            "/\(token)/show%2F1/original/plan.json", "/\(token)/show%2F1/", "/\(token)/unknown/index.m3u8", "/", "/\(token)",
        ] {
            let connection = try RawConnection(port: try #require(server.port))
            await connection.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(await connection.readResponse(timeout: 15)?.status == 404, "\(path)")
        }
        await bench.stop()
    }

    @Test func theFirstRequestOfAPlayIsItsStartAndAnAssetPastItsRightsIsRefusedAtTheDoor() async throws {
        let time = SimulatedTime()
        let server = try await InProcessBackplane.start(now: { time.now })
        _ = try await server.services.applications.updateSettings(
            applicationId: server.applicationId, ApplicationSettingsUpdate { $0.expiryAfterPlaySeconds = 300 })
        let bench = try await DownloadBench.start(server: server, rights: { rights in
            rights.deviceClock = time
            rights.sweepInterval = .seconds(3_600)
        })
        let now = try #require(try await bench.engine.rights.trustedTime().date)
        bench.origin.serve("/film.mp4", TestOrigin.content(50_000))
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "film", url: bench.origin.url("/film.mp4"), availability: AssetAvailability(expiryDate: now.addingTimeInterval(600))))
        #expect(try await bench.waitForOutcome("film").state == .completed)
        #expect(try await bench.engine.rights.rights(for: "film") == .valid(until: now.addingTimeInterval(600)))
        let url = try await bench.engine.playback.url(for: "film")
        #expect(url.pathExtension == "mp4")
        let playable = try await Self.get(url, range: "bytes=0-99")
        #expect(playable.status == 206 && playable.body == TestOrigin.content(50_000).prefix(100))
        // The player's first request started the play: the expiry after play runs, and the
        // player's next reads belong to the same play.
        #expect(try await bench.engine.rights.rights(for: "film") == .valid(until: now.addingTimeInterval(300)))
        for offset in [100, 200, 300] { _ = try await Self.get(url, range: "bytes=\(offset)-\(offset + 99)") }
        _ = try await bench.engine.uploadEvents()
        let starts = try await server.storedEvents(EventFilter(type: .playStart))
        #expect(starts.count == 1, "\(starts.count) play starts for one play")

        time.advance(by: 900)
        let refused = try await Self.get(url)
        #expect(refused.status == 403)
        #expect(String(decoding: refused.body, as: UTF8.self).contains("expired"))
        try await bench.events.wait(for: "playbackRefused") { event in
            if case .playbackRefused("film", .expired) = event { true } else { false }
        }
        await bench.stop()
    }

    @Test func anAssetNotDownloadedHasNoURL() async throws {
        let bench = try await DownloadBench.start()
        let error = await #expect(throws: BackplaneClientError.self) { try await bench.engine.playback.url(for: "nothing") }
        #expect(error?.kind == .invalidInput)
        await bench.stop()
    }
}
