import ClientSDK
import Foundation
import Testing
import TestSupport

/// A Smooth Streaming asset made by ffmpeg's `smoothstreaming` muxer (two video quality levels
/// and AAC audio, 4 s in 1 s fragments), served by a real HTTP origin, downloaded by the engine
/// with the lower video, and played to its end by GStreamer's `mssdemux` through the playback
/// server, from the local manifest and the fragments on disk alone. Needs Debian's ffmpeg and
/// GStreamer with -plugins-bad (see `PlaybackPlayersTests` for how CI makes sure it ran).
@Suite(.serialized) struct SmoothStreamingTests {
    /// Makes the asset under `root` and serves it from `origin` under `/ss/film.ism/`.
    ///
    /// ffmpeg's fragments start after 0 (the encoder's delay) while its manifest says no `t`, so
    /// a player would ask for `Fragments(video=0)`: the manifest gets each fragment's `t` from
    /// the files ffmpeg wrote, as a packaging server's manifest has them.
    static func makeAsset(in root: URL, origin: TestOrigin) async throws -> [String: [Int64]] {
        let directory = root.appendingPathComponent("film.ism")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let made = try await ChildProcess.run(PlaybackPlayersTests.ffmpeg, [
            "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=25", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100",
            "-t", "4", "-map", "0:v", "-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-preset", "ultrafast", "-g", "25",
            "-b:v:0", "300k", "-b:v:1", "800k", "-s:v:1", "640x480", "-c:a", "aac", "-b:a", "64k",
            "-f", "smoothstreaming", "-window_size", "0", "-min_frag_duration", "1000000", directory.path,
        ], timeout: .seconds(120))
        try #require(made.status == 0, "ffmpeg: \(made.output)")
        // Fragment start times by stream name, from `QualityLevels(b)/Fragments(name=t)`.
        var times: [String: Set<Int64>] = [:]
        for level in try FileManager.default.contentsOfDirectory(atPath: directory.path) where level.hasPrefix("QualityLevels(") {
            for file in try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent(level).path) {
                if file.hasPrefix("Fragments(") {
                    let inside = file.dropFirst("Fragments(".count).dropLast()
                    let parts = inside.split(separator: "=")
                    if parts.count == 2, let time = Int64(parts[1]) { times[String(parts[0]), default: []].insert(time) }
                }
                let path = "/ss/film.ism/\(level)/\(file)"
                origin.serve(path, try Data(contentsOf: directory.appendingPathComponent(level).appendingPathComponent(file)), contentType: "video/mp4")
            }
        }
        let sorted = times.mapValues { $0.sorted() }
        var manifest = try String(contentsOf: directory.appendingPathComponent("Manifest"), encoding: .utf8)
        for (name, starts) in sorted {
            // Within the StreamIndex whose Url names the stream, `<c n="k"` gets `t` of the k-th file.
            guard let url = manifest.range(of: "Fragments(\(name)={start time})") else { continue }
            let end = manifest.range(of: "</StreamIndex>", range: url.upperBound..<manifest.endIndex)?.lowerBound ?? manifest.endIndex
            var block = String(manifest[url.upperBound..<end])
            for (number, time) in starts.enumerated() {
                block = block.replacingOccurrences(of: "<c n=\"\(number)\" ", with: "<c n=\"\(number)\" t=\"\(time)\" ")
            }
            manifest.replaceSubrange(url.upperBound..<end, with: block)
        }
        origin.serve("/ss/film.ism/Manifest", Data(manifest.utf8), contentType: "text/xml")
        return sorted
    }

    @Test func anFFmpegAssetDownloadsAndGStreamerPlaysItToTheEndOffline() async throws {
        guard PlaybackPlayersTests.playersAreInstalled() else { return }
        let root = try createdTemporaryDirectory("backplane-smooth")
        defer { try? FileManager.default.removeItem(at: root) }
        let bench = try await DownloadBench.start()
        let times = try await Self.makeAsset(in: root, origin: bench.origin)
        #expect(times["video"]?.count == 4 && times["audio"]?.count == 4, "\(times)")

        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "smooth", url: bench.origin.url("/ss/film.ism/Manifest"), kind: .smooth, maxVideoBitrate: 500_000))
        let asset = try await bench.waitForOutcome("smooth", timeout: .seconds(60))
        try #require(asset.state == .completed, "\(String(describing: asset.lastFailure))")
        // The 300 kbit/s video and the audio, each fragment once; nothing of the 800 kbit/s one.
        #expect(bench.origin.requests(under: "/ss/film.ism/QualityLevels(300000)/Fragments(").count == 4)
        #expect(bench.origin.requests(under: "/ss/film.ism/QualityLevels(64000)/Fragments(").count == 4)
        #expect(bench.origin.requests(under: "/ss/film.ism/QualityLevels(800000)/").isEmpty)
        let local = try #require(asset.localURL)
        #expect(local.lastPathComponent == "Manifest")
        let manifest = try String(contentsOf: local, encoding: .utf8)
        #expect(manifest.contains("Url=\"video/{start time}.m4s\"") && !manifest.contains("800000"), "\(manifest)")

        // Offline: the origin is not asked while GStreamer plays through the playback server.
        let before = bench.origin.requests(under: "/ss/").values.reduce(0, +)
        let url = try await bench.engine.playback.url(for: "smooth")
        let (played, output) = try await PlaybackPlayersTests.playsToTheEnd(url)
        #expect(played, "gst-launch playbin \(url): \(output)")
        #expect(bench.origin.requests(under: "/ss/").values.reduce(0, +) == before)
        await bench.stop()
        try PlaybackPlayersTests.report(
            "smooth: GStreamer's mssdemux played an ffmpeg-made Smooth Streaming asset (H.264 and AAC) to the end through the playback server")
    }
}
