import ClientSDK
import Foundation
import Testing
import TestSupport

/// Real players through the playback server: assets made by ffmpeg in the test (AES-128 MPEG-TS,
/// and fMP4 clear and with AES-128 segments), downloaded by the engine from a real origin, then
/// played from the loopback URL by ffprobe (every frame counted) and GStreamer's playbin (to the
/// end of the stream), eight ffprobes at once too.
///
/// Needs Debian's ffmpeg and gstreamer1.0-tools with -plugins-good, -bad and -libav. Without them
/// the test is skipped with a warning, unless BACKPLANE_REQUIRE_PLAYERS=1 (CI), which fails it;
/// BACKPLANE_PLAYERS_REPORT names a file it writes when it ran, which CI checks.
@Suite(.serialized) struct PlaybackPlayersTests {
    static let ffmpeg = URL(fileURLWithPath: "/usr/bin/ffmpeg")
    static let ffprobe = URL(fileURLWithPath: "/usr/bin/ffprobe")
    static let gstLaunch = URL(fileURLWithPath: "/usr/bin/gst-launch-1.0")
    static let openssl = URL(fileURLWithPath: "/usr/bin/openssl")
    /// 4 s at 25 frames per second.
    static let frames = 100

    static var playersInstalled: Bool {
        [ffmpeg, ffprobe, gstLaunch, openssl].allSatisfy { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    enum Packaging: String, CaseIterable {
        case tsAES128, fmp4Clear, fmp4AES128
    }

    /// Makes the asset with ffmpeg (and openssl for the fMP4 segments' AES-128, which ffmpeg's
    /// muxer does not do) and serves it from `origin` under `/<packaging>/`.
    static func makeAsset(_ packaging: Packaging, in root: URL, origin: TestOrigin) async throws {
        let directory = root.appendingPathComponent(packaging.rawValue)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let key = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
        try key.write(to: directory.appendingPathComponent("key.bin"))
        try "key.bin\n\(directory.appendingPathComponent("key.bin").path)\n".write(
            to: directory.appendingPathComponent("keyinfo"), atomically: true, encoding: .utf8)
        var arguments = [
            "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=25", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100",
            "-t", "4", "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-c:a", "aac", "-b:a", "64k",
            "-hls_time", "1", "-hls_playlist_type", "vod",
        ]
        switch packaging {
        case .tsAES128:
            arguments += ["-hls_key_info_file", directory.appendingPathComponent("keyinfo").path,
                          "-hls_segment_filename", directory.appendingPathComponent("seg%d.ts").path]
        case .fmp4Clear, .fmp4AES128:
            arguments += ["-hls_segment_type", "fmp4", "-hls_fmp4_init_filename", "init.mp4",
                          "-hls_segment_filename", directory.appendingPathComponent("seg%d.m4s").path]
        }
        arguments.append(directory.appendingPathComponent("media.m3u8").path)
        let made = try await ChildProcess.run(ffmpeg, arguments, timeout: .seconds(120))
        try #require(made.status == 0, "ffmpeg: \(made.output)")

        var media = try String(contentsOf: directory.appendingPathComponent("media.m3u8"), encoding: .utf8)
        if packaging == .fmp4AES128 {
            // The init section stays clear (the key line comes after EXT-X-MAP, RFC 8216 §4.3.2.4);
            // each segment is encrypted whole with AES-128-CBC and PKCS#7 padding.
            let hexKey = key.map { String(format: "%02x", $0) }.joined()
            for file in try FileManager.default.contentsOfDirectory(atPath: directory.path) where file.hasSuffix(".m4s") {
                let path = directory.appendingPathComponent(file).path
                let encrypted = try await ChildProcess.run(openssl, [
                    "enc", "-aes-128-cbc", "-K", hexKey, "-iv", String(repeating: "0", count: 32), "-in", path, "-out", path + ".enc"])
                try #require(encrypted.status == 0, "openssl: \(encrypted.output)")
                try FileManager.default.removeItem(atPath: path)
                try FileManager.default.moveItem(atPath: path + ".enc", toPath: path)
            }
            media = media.replacingOccurrences(
                of: "#EXT-X-MAP:URI=\"init.mp4\"\n",
                with: "#EXT-X-MAP:URI=\"init.mp4\"\n#EXT-X-KEY:METHOD=AES-128,URI=\"key.bin\",IV=0x00000000000000000000000000000000\n")
        }
        let master = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=900000,RESOLUTION=320x240\nmedia.m3u8\n"
        let prefix = "/\(packaging.rawValue)"
        origin.serve("\(prefix)/master.m3u8", Data(master.utf8), contentType: "application/vnd.apple.mpegurl")
        origin.serve("\(prefix)/media.m3u8", Data(media.utf8), contentType: "application/vnd.apple.mpegurl")
        for file in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
            let type = file.hasSuffix(".ts") ? "video/mp2t" : file.hasSuffix(".m4s") || file.hasSuffix(".mp4") ? "video/mp4" : "application/octet-stream"
            if file.hasSuffix(".m3u8") || file == "keyinfo" { continue }
            origin.serve("\(prefix)/\(file)", try Data(contentsOf: directory.appendingPathComponent(file)), contentType: type)
        }
    }

    static func countFrames(_ url: URL) async throws -> Int? {
        let probe = try await ChildProcess.run(ffprobe, [
            "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0",
            url.absoluteString,
        ], timeout: .seconds(120))
        return probe.status == 0 ? Int(probe.output.split(separator: "\n").last.map(String.init) ?? "") : nil
    }

    static func playsToTheEnd(_ url: URL) async throws -> (Bool, String) {
        let played = try await ChildProcess.run(gstLaunch, [
            "-q", "playbin", "uri=\(url.absoluteString)", "video-sink=fakesink", "audio-sink=fakesink",
        ], timeout: .seconds(120))
        return (played.status == 0, played.output)
    }

    /// Whether the players are there; without them the test is skipped, or fails in CI.
    static func playersAreInstalled() -> Bool {
        guard playersInstalled else {
            let message = "ffmpeg or GStreamer is not installed (apt-get install ffmpeg gstreamer1.0-tools gstreamer1.0-plugins-good "
                + "gstreamer1.0-plugins-bad gstreamer1.0-libav): the playback players test did not run"
            if ProcessInfo.processInfo.environment["BACKPLANE_REQUIRE_PLAYERS"] == "1" { Issue.record(Comment(rawValue: message)) }
            print("warning: \(message)")
            return false
        }
        return true
    }

    /// Adds a line to the report CI reads (`BACKPLANE_PLAYERS_REPORT`).
    static func report(_ line: String) throws {
        guard let path = ProcessInfo.processInfo.environment["BACKPLANE_PLAYERS_REPORT"] else { return }
        // Appended, not read and rewritten: suites running at once each add their line.
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT, 0o644)
        guard descriptor >= 0 else { throw CocoaError(.fileWriteUnknown) }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        try handle.write(contentsOf: Data((line + "\n").utf8))
    }

    @Test func ffprobeAndGStreamerPlayDownloadsThroughTheServer() async throws {
        guard Self.playersAreInstalled() else { return }
        let root = try createdTemporaryDirectory("backplane-players")
        defer { try? FileManager.default.removeItem(at: root) }
        let bench = try await DownloadBench.start()
        for packaging in Packaging.allCases {
            try await Self.makeAsset(packaging, in: root, origin: bench.origin)
            try await bench.engine.downloads.enqueue(DownloadRequest(
                assetId: packaging.rawValue, url: bench.origin.url("/\(packaging.rawValue)/master.m3u8"), kind: .hls))
            let asset = try await bench.waitForOutcome(packaging.rawValue, timeout: .seconds(60))
            try #require(asset.state == .completed, "\(packaging): \(String(describing: asset.lastFailure))")
            let url = try await bench.engine.playback.url(for: packaging.rawValue)

            #expect(try await Self.countFrames(url) == Self.frames, "ffprobe through \(url) (\(packaging))")
            // GStreamer's HLS demuxers in Debian 12 decrypt AES-128 MPEG-TS but not AES-128 fMP4.
            if packaging != .fmp4AES128 {
                let (played, output) = try await Self.playsToTheEnd(url)
                #expect(played, "gst-launch playbin \(url) (\(packaging)): \(output)")
            }
        }

        // Eight players at once, on one asset.
        let url = try await bench.engine.playback.url(for: Packaging.tsAES128.rawValue)
        let counts = try await withThrowingTaskGroup(of: Int?.self) { group in
            for _ in 0..<8 { group.addTask { try await Self.countFrames(url) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(counts == Array(repeating: Self.frames, count: 8), "\(counts)")
        await bench.stop()
        try Self.report("players: ffprobe counted \(Self.frames) frames of AES-128 TS, clear fMP4 and AES-128 fMP4 through the playback server; "
            + "GStreamer playbin played TS and clear fMP4 to the end; 8 ffprobes at once")
    }

    /// An asset still downloading from a slow origin (each segment 1.5 s, one file at a time)
    /// plays in full through the playback server, by ffprobe and GStreamer at once, while it
    /// downloads: the playlists from the download's plan, the key and the segments not on disk
    /// yet from the origin.
    @Test func ffprobeAndGStreamerPlayAnAssetWhileItDownloadsFromASlowOrigin() async throws {
        guard Self.playersAreInstalled() else { return }
        let root = try createdTemporaryDirectory("backplane-players-slow")
        defer { try? FileManager.default.removeItem(at: root) }
        let bench = try await DownloadBench.start(options: { $0.parallelFiles = 1 })
        try await Self.makeAsset(.tsAES128, in: root, origin: bench.origin)
        let segments = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("tsAES128").path).filter { $0.hasSuffix(".ts") }
        try #require(segments.count >= 3, "\(segments)")
        for segment in segments { bench.origin.inject(.delay(.milliseconds(1_500)), at: "/tsAES128/\(segment)") }
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "slow", url: bench.origin.url("/tsAES128/master.m3u8"), kind: .hls))
        let url = try await PlaybackWhileDownloadingTests.urlWhileDownloading("slow", bench)

        async let frames = Self.countFrames(url)
        async let played = Self.playsToTheEnd(url)
        #expect(try await frames == Self.frames, "ffprobe through \(url) while it downloads")
        let (ended, output) = try await played
        #expect(ended, "gst-launch playbin \(url) while it downloads: \(output)")
        // The players overtook the download: some segments were fetched for them from the origin.
        let fetched = segments.map { bench.origin.requests("/tsAES128/\($0)") }
        #expect(fetched.reduce(0, +) > segments.count, "requests per segment: \(fetched)")
        #expect(try await bench.waitForOutcome("slow", timeout: .seconds(60)).state == .completed)
        await bench.stop()
        try Self.report("players while downloading: ffprobe counted \(Self.frames) frames and GStreamer played to the end of an AES-128 TS asset "
            + "still downloading from a slow origin")
    }
}
