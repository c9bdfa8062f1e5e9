import AsyncHTTPClient
import Backplane
import ClientSDK
import Foundation
import NIOCore
import NIOHTTP1
import Testing
import TestSupport

/// Playing the asset the engine is downloading, through the playback server, over real HTTP: the
/// local playlists come from the plan before the download writes them, files on disk are served
/// from disk, and the rest are fetched from the origin as the player asks (ranges translated for
/// byte-range segments), or answer 404 when the origin cannot be reached.
@Suite struct PlaybackWhileDownloadingTests {
    static func get(_ url: URL, range: String? = nil) async throws -> PlaybackServerTests.Answer {
        try await PlaybackServerTests.get(url, range: range)
    }

    /// The URL once the engine is downloading the asset and has its plan.
    static func urlWhileDownloading(_ assetId: String, _ bench: DownloadBench) async throws -> URL {
        var url: URL?
        try await bench.wait("a playback URL for \(assetId) while it downloads") {
            url = try? await bench.engine.playback.url(for: assetId)
            return url != nil
        }
        let state = try await bench.engine.downloads.asset(assetId)?.state
        try #require(state != .completed, "\(assetId) completed before the test could play it while it downloads")
        return try #require(url)
    }

    @Test func anHLSAssetPlaysInFullWhileItDownloadsAndItsFirstPlayStaysWithIt() async throws {
        let server = try await InProcessBackplane.start()
        _ = try await server.services.applications.updateSettings(
            applicationId: server.applicationId, ApplicationSettingsUpdate { $0.expiryAfterPlaySeconds = 300 })
        let bench = try await DownloadBench.start(server: server, options: { $0.parallelFiles = 1 })
        _ = TestHLSAsset(serving: bench.origin)
        // The last audio segment holds the download back until the player asks for it too (a
        // fixed delay was outrun by a slow player beside CPU hogs: the download then had it).
        bench.origin.inject(.holdUntilAskedAgain(timeout: .seconds(60)), at: "/hls/audio/en/5.aac")
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "show", url: bench.origin.url("/hls/master.m3u8"), kind: .hls, allowedMIMETypes: TestHLSAsset.mediaTypes,
            maxVideoBitrate: 0, audioLanguages: ["en"], subtitleLanguages: ["en"]))
        let url = try await Self.urlWhileDownloading("show", bench)
        #expect(url.lastPathComponent == "index.m3u8")
        let base = url.deletingLastPathComponent()
        let before = try #require(try await bench.engine.rights.trustedTime().date)

        // The local playlists are served before the download writes them.
        let master = try await Self.get(url)
        #expect(master.status == 200 && String(decoding: master.body, as: UTF8.self).contains("video.m3u8"))
        #expect(try await bench.engine.downloads.asset("show")?.state != .completed)

        // Every playlist and file a player reaches from the master, as a player reads them.
        var served: [String: Data] = [:]
        var pending = ["index.m3u8"]
        while let path = pending.popLast() {
            let answer = try await Self.get(base.appendingPathComponent(path))
            #expect(answer.status == 200, "\(path)")
            served[path] = answer.body
            guard path.hasSuffix(".m3u8") else { continue }
            #expect(answer.headers.first(name: "Content-Type") == "application/vnd.apple.mpegurl")
            let text = String(decoding: answer.body, as: UTF8.self)
            let folder = (path as NSString).deletingLastPathComponent
            for line in text.split(separator: "\n") {
                let uri = line.hasPrefix("#") ? line.range(of: "URI=\"").map { String(line[$0.upperBound...].prefix { $0 != "\"" }) } : String(line)
                guard let uri, !uri.isEmpty else { continue }
                pending.append(folder.isEmpty ? uri : folder + "/" + uri)
            }
        }
        #expect(served.keys.contains { $0.hasPrefix("keys/") } && served.keys.contains { $0.hasSuffix(".aac") })
        // The held-back segment was fetched for the player too, not only for the download (the
        // download's own request is answered a moment after the player's, once it is asked again).
        try await bench.wait("the origin to answer the held-back segment twice") { bench.origin.requests("/hls/audio/en/5.aac") == 2 }
        #expect(bench.origin.requests("/hls/audio/en/5.aac") == 2)

        // What the player got is what the finished download holds, byte for byte.
        let asset = try await bench.waitForOutcome("show")
        try #require(asset.state == .completed)
        let directory = try #require(asset.localURL).deletingLastPathComponent()
        let files = try FileManager.default.subpathsOfDirectory(atPath: directory.path).filter { path in
            var isDirectory: ObjCBool = false
            return !path.hasPrefix("original")
                && FileManager.default.fileExists(atPath: directory.appendingPathComponent(path).path, isDirectory: &isDirectory) && !isDirectory.boolValue
        }
        #expect(Set(served.keys) == Set(files), "served \(served.keys.sorted()), on disk \(files.sorted())")
        for (path, body) in served {
            // A key lies sealed on disk, and is served opened: the origin's 16 bytes.
            let expected = path.hasSuffix(".key") ? bench.origin.bytes(at: "/hls/keys/k1.key") : try Data(contentsOf: directory.appendingPathComponent(path))
            #expect(body == expected, "\(path)")
        }
        // The play began while the asset downloaded: its expiry after play runs from then.
        guard case .valid(let until?) = try await bench.engine.rights.rights(for: "show") else {
            Issue.record("no expiry after play: \(try await bench.engine.rights.rights(for: "show"))")
            return await bench.stop()
        }
        #expect(until >= before.addingTimeInterval(299) && until <= before.addingTimeInterval(330), "\(until) against \(before)")
        _ = try await bench.engine.uploadEvents()
        #expect(try await server.storedEvents(EventFilter(type: .playStart)).count == 1)
        await bench.stop()
    }

    @Test func filesNotOnDiskComeFromTheOriginOr404WhenItCannotBeReached() async throws {
        let bench = try await DownloadBench.start(options: { $0.parallelFiles = 1 })
        let origin = bench.origin
        // Held refusing for the whole test: a port merely free could be another test's server by the time it is asked.
        let dead = try RefusingPort()
        defer { dead.close() }
        let deadPort = dead.port
        origin.serve("/clip/0.ts", TestOrigin.content(5_000, seed: 3), contentType: "video/mp2t")
        origin.serve("/clip/1.ts", TestOrigin.content(6_000, seed: 4), contentType: "video/mp2t")
        let packed = TestOrigin.content(4_000, seed: 5)
        origin.serve("/clip/packed.ts", packed, contentType: "video/mp2t")
        // The download waits on the first segment (the test is over long before); the third is
        // at an origin that is not there; the fourth is bytes 500..<1500 of a larger file.
        origin.inject(.delay(.seconds(10)), at: "/clip/0.ts")
        origin.serve("/clip/media.m3u8", Data("""
            #EXTM3U
            #EXT-X-TARGETDURATION:4
            #EXT-X-PLAYLIST-TYPE:VOD
            #EXTINF:4.0,
            0.ts
            #EXTINF:4.0,
            1.ts
            #EXTINF:4.0,
            http://127.0.0.1:\(deadPort)/clip/2.ts
            #EXTINF:4.0,
            #EXT-X-BYTERANGE:1000@500
            packed.ts
            #EXT-X-ENDLIST

            """.utf8), contentType: "application/vnd.apple.mpegurl")
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "clip", url: origin.url("/clip/media.m3u8"), kind: .hls))
        let base = try await Self.urlWhileDownloading("clip", bench).deletingLastPathComponent()

        let playlist = try await Self.get(base.appendingPathComponent("index.m3u8"))
        #expect(playlist.status == 200 && String(decoding: playlist.body, as: UTF8.self).contains("video/2.ts"))
        let second = try await Self.get(base.appendingPathComponent("video/1.ts"))
        #expect(second.status == 200 && second.body == TestOrigin.content(6_000, seed: 4))
        #expect(second.headers.first(name: "Content-Type") == "video/mp2t")
        let tail = try await Self.get(base.appendingPathComponent("video/1.ts"), range: "bytes=5990-")
        #expect(tail.status == 206 && tail.body == TestOrigin.content(6_000, seed: 4).suffix(10))
        #expect(tail.headers.first(name: "Content-Range") == "bytes 5990-5999/6000")
        // A byte-range segment: the player's range is translated into the origin's file, and
        // answered as the local file's; an origin that ignores ranges has the bytes cut out.
        let part = try await Self.get(base.appendingPathComponent("video/3.ts"), range: "bytes=10-19")
        #expect(part.status == 206 && part.body == packed[510..<520])
        #expect(part.headers.first(name: "Content-Range") == "bytes 10-19/1000")
        origin.inject(.ignoreRange, at: "/clip/packed.ts")
        let whole = try await Self.get(base.appendingPathComponent("video/3.ts"))
        #expect(whole.status == 200 && whole.body == packed[500..<1500])
        #expect(origin.requests("/clip/packed.ts") == 2, "both from the origin: the download has not reached it")
        // Offline: what is not on disk is not found, as a file missing from a finished download.
        #expect(try await Self.get(base.appendingPathComponent("video/2.ts")).status == 404)
        // An origin's error is not passed on as media.
        origin.inject(.failFirst(1_000, status: 500), at: "/clip/1.ts")
        #expect(try await Self.get(base.appendingPathComponent("video/1.ts")).status == 502)
        // Nothing outside the plan.
        #expect(try await Self.get(base.appendingPathComponent("video/4.ts")).status == 404)
        #expect(try await bench.engine.downloads.asset("clip")?.state != .completed)
        await bench.stop()
    }

    @Test func aFlatFilePlaysWhileItDownloadsWithThePlayersRanges() async throws {
        let bench = try await DownloadBench.start()
        let film = TestOrigin.content(50_000, seed: 7)
        bench.origin.serve("/film.mp4", film)
        bench.origin.inject(.delay(.seconds(2)), at: "/film.mp4")
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "film", url: bench.origin.url("/film.mp4")))
        let url = try await Self.urlWhileDownloading("film", bench)
        #expect(url.lastPathComponent == "film.mp4")
        let end = try await Self.get(url, range: "bytes=49000-")
        #expect(end.status == 206 && end.body == film.suffix(1_000))
        #expect(end.headers.first(name: "Content-Range") == "bytes 49000-49999/50000")
        let whole = try await Self.get(url)
        #expect(whole.status == 200 && whole.body == film)
        #expect(try await bench.waitForOutcome("film").state == .completed)
        // Once downloaded, from disk: the origin is not asked again.
        let requests = bench.origin.requests("/film.mp4")
        #expect(try await Self.get(url, range: "bytes=0-9").body == film.prefix(10))
        #expect(bench.origin.requests("/film.mp4") == requests)
        await bench.stop()
    }

    @Test func anAssetNeitherDownloadedNorDownloadingHasNoURL() async throws {
        let bench = try await DownloadBench.start(options: { $0.parallelFiles = 1 })
        bench.origin.serve("/a.mp4", TestOrigin.content(1_000))
        bench.origin.serve("/b.mp4", TestOrigin.content(1_000))
        bench.origin.inject(.delay(.seconds(3)), at: "/a.mp4")
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "a", url: bench.origin.url("/a.mp4")))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "b", url: bench.origin.url("/b.mp4")))
        _ = try await Self.urlWhileDownloading("a", bench)
        // Queued behind it: not started, so not granted or checked yet.
        let error = await #expect(throws: BackplaneClientError.self) { try await bench.engine.playback.url(for: "b") }
        #expect(error?.kind == .invalidInput)
        await bench.stop()
    }
}
