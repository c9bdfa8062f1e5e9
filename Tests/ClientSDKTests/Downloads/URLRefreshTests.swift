import ClientSDK
import Foundation
import Synchronization
import Testing
import TestSupport

/// Signed URLs that expire mid-download: the app's `URLRefresher` gives a fresh one when the
/// origin refuses the old (403), and the download goes on from what is on disk, every byte
/// fetched once (the origin counts them); `updateURL` swaps a queued asset's URL, and refuses one
/// whose manifests describe other media.
@Suite(.serialized) struct URLRefreshTests {
    /// Hands out `token=<n+1>` URLs and remembers what it was asked.
    final class TokenRefresher: URLRefresher {
        let asked = Mutex<[(assetId: String, status: Int)]>([])
        let onRefresh: @Sendable (Int) -> Void

        init(onRefresh: @escaping @Sendable (Int) -> Void = { _ in }) { self.onRefresh = onRefresh }

        func refreshedURL(for asset: DownloadRequest, status: Int) async throws -> URL? {
            let count = asked.withLock { asked in
                asked.append((asset.assetId, status))
                return asked.count
            }
            onRefresh(count + 1)
            var components = URLComponents(url: asset.url, resolvingAgainstBaseURL: false)!
            components.query = "token=\(count + 1)"
            return components.url
        }
    }

    /// A CDN that honours only the newest token (`valid`); the first one expires after `grace`
    /// requests of media (segments or files; playlists do not count).
    final class TokenGate: Sendable {
        let valid = Mutex(1)
        let firstTokenRequests = Mutex(0)
        let grace: Int

        init(grace: Int) { self.grace = grace }

        func status(path: String, query: String?) -> Int? {
            let token = query.flatMap { $0.hasPrefix("token=") ? Int($0.dropFirst(6)) : nil }
            guard let token, token == valid.withLock({ $0 }) else { return 403 }
            guard token == 1, !path.hasSuffix(".m3u8") else { return nil }
            return firstTokenRequests.withLock { count in
                count += 1
                return count <= grace ? nil : 403
            }
        }
    }

    @Test func aFlatFileWhoseURLExpiresMidDownloadGoesOnFromAFreshOne() async throws {
        let gate = TokenGate(grace: 1)
        let origin = try await TestOrigin.start()
        let dataDirectory = temporaryDirectory("sdk-refresh")
        // When the fresh URL is asked for: what the origin has sent, and what the device kept.
        let atRefresh = Mutex<(served: Int, kept: Int)?>(nil)
        let refresher = TokenRefresher { token in
            atRefresh.withLock { $0 = (origin.bytesServed("/film.mp4"), Self.partialBytes(under: dataDirectory.appendingPathComponent("content"))) }
            gate.valid.withLock { $0 = token }
        }
        let bench = try await DownloadBench.start(dataDirectory: dataDirectory, origin: origin, options: { $0.urlRefresher = refresher })
        let body = TestOrigin.content(3_000_000, seed: 8)
        bench.origin.serve("/film.mp4", body)
        // The first answer breaks off after 1 MB; the token has expired when it is resumed.
        bench.origin.inject(.dropAfter(bytes: 1_000_000, times: 1), at: "/film.mp4")
        bench.origin.setGate { gate.status(path: $0, query: $1) }
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "film", url: bench.origin.url("/film.mp4?token=1")))
        let film = try await bench.waitForOutcome("film")
        #expect(film.state == .completed, "\(String(describing: film.lastFailure))")
        #expect(film.errorCount == 0 && film.request.url.query == "token=2")
        #expect(refresher.asked.withLock { $0.map(\.status) } == [403])
        #expect(try Data(contentsOf: try #require(film.localURL)) == body)
        // After the refusal, only the bytes the device did not hold: none fetched twice.
        let before = try #require(atRefresh.withLock { $0 })
        #expect(before.kept > 0 && before.kept < body.count, "\(before)")
        #expect(bench.origin.bytesServed("/film.mp4") - before.served == body.count - before.kept)
        await bench.stop()
    }

    /// An HLS asset whose segments' token expires after four of eight: the refresher's URL gives
    /// new playlists naming the same segments with a new token; the four on disk stay.
    @Test func anHLSAssetWhoseTokenExpiresGoesOnWithTheSegmentsOnDisk() async throws {
        let gate = TokenGate(grace: 4)
        let origin = try await TestOrigin.start()
        let segments = (0..<8).map { TestOrigin.content(50_000 + $0, seed: UInt8(20 + $0)) }
        for (index, segment) in segments.enumerated() { origin.serve("/tok/seg\(index).ts", segment, contentType: "video/mp2t") }
        Self.servePlaylists(origin, token: 1)
        let refresher = TokenRefresher { token in
            Self.servePlaylists(origin, token: token)
            gate.valid.withLock { $0 = token }
        }
        let bench = try await DownloadBench.start(origin: origin, options: { $0.parallelFiles = 1; $0.urlRefresher = refresher })
        origin.setGate { gate.status(path: $0, query: $1) }
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "show", url: origin.url("/tok/master.m3u8?token=1"), kind: .hls))
        let show = try await bench.waitForOutcome("show")
        #expect(show.state == .completed, "\(String(describing: show.lastFailure))")
        #expect(show.errorCount == 0)
        #expect(refresher.asked.withLock { $0.count } == 1)
        for (index, segment) in segments.enumerated() {
            #expect(bench.origin.bytesServed("/tok/seg\(index).ts") == segment.count, "segment \(index) fetched again")
        }
        await bench.stop()
    }

    @Test func updateURLSwapsAQueuedAssetsURLOnlyForTheSameMedia() async throws {
        let bench = try await DownloadBench.start()
        let segments = (0..<8).map { TestOrigin.content(50_000 + $0, seed: UInt8(20 + $0)) }
        for (index, segment) in segments.enumerated() { bench.origin.serve("/tok/seg\(index).ts", segment, contentType: "video/mp2t") }
        Self.servePlaylists(bench.origin, token: 1)
        try await bench.engine.downloads.setEnabled(false)
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "show", url: bench.origin.url("/tok/master.m3u8?token=1"), kind: .hls))

        // Seven segments where there were eight: other media, refused, and the old URL stays.
        bench.origin.serve("/other/master.m3u8", Data("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=800000\nmedia.m3u8\n".utf8), contentType: "application/vnd.apple.mpegurl")
        bench.origin.serve("/other/media.m3u8", Self.media(token: 1, count: 7), contentType: "application/vnd.apple.mpegurl")
        do {
            try await bench.engine.downloads.updateURL(assetId: "show", url: bench.origin.url("/other/master.m3u8"))
            Issue.record("other media was taken")
        } catch let error as BackplaneClientError {
            #expect(error.kind == .download && error.message.contains("lists 7 files where the one being downloaded lists 8"), "\(error.message)")
        }
        #expect(try await bench.engine.downloads.asset("show")?.request.url.query == "token=1")
        // Not queued, or not http(s): invalid input.
        await #expect(throws: BackplaneClientError.self) { try await bench.engine.downloads.updateURL(assetId: "nothing", url: bench.origin.url("/x")) }
        await #expect(throws: BackplaneClientError.self) { try await bench.engine.downloads.updateURL(assetId: "show", url: URL(string: "file:///etc/passwd")!) }

        // The same segments with a new token: taken, and downloaded from it.
        Self.servePlaylists(bench.origin, token: 2)
        try await bench.engine.downloads.updateURL(assetId: "show", url: bench.origin.url("/tok/master.m3u8?token=2"))
        #expect(try await bench.engine.downloads.asset("show")?.request.url.query == "token=2")
        bench.origin.setGate { _, query in query == "token=2" ? nil : 403 }
        try await bench.engine.downloads.setEnabled(true)
        #expect(try await bench.waitForOutcome("show").state == .completed)
        await bench.stop()
    }

    static func media(token: Int, count: Int = 8) -> Data {
        var playlist = "#EXTM3U\n#EXT-X-TARGETDURATION:6\n"
        for index in 0..<count { playlist += "#EXTINF:6.0,\nseg\(index).ts?token=\(token)\n" }
        return Data((playlist + "#EXT-X-ENDLIST\n").utf8)
    }

    static func servePlaylists(_ origin: TestOrigin, token: Int) {
        origin.serve("/tok/master.m3u8", Data("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=800000\nmedia.m3u8?token=\(token)\n".utf8), contentType: "application/vnd.apple.mpegurl")
        origin.serve("/tok/media.m3u8", media(token: token), contentType: "application/vnd.apple.mpegurl")
    }

    /// Bytes of the partial files under `directory` (not their resume information).
    static func partialBytes(under directory: URL) -> Int {
        guard let walk = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.fileSizeKey]) else { return 0 }
        var total = 0
        for case let file as URL in walk where file.pathExtension == "partial" {
            total += (try? file.resourceValues(forKeys: [.fileSizeKey]))?.fileSize ?? 0
        }
        return total
    }
}
