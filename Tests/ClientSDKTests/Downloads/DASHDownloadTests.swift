import ClientSDK
import Foundation
import Testing
import TestSupport

/// DASH assets made by ffmpeg in the test, served by a real HTTP origin, downloaded by the
/// engine and then decoded offline, in full, by ffprobe from the local MPD: a template with a
/// timeline (two video Representations, audio in English and French), a single file per
/// Representation indexed by its `sidx` (`SegmentBase`), and a `$Time$` template. Needs Debian's
/// ffmpeg (see `PlaybackPlayersTests` for how CI makes sure it ran).
@Suite(.serialized) struct DASHDownloadTests {
    enum Packaging: String, CaseIterable {
        /// `-use_template 1 -use_timeline 1`: `$Number%05d$`, `SegmentTimeline`.
        case template
        /// `-single_file 1 -global_sidx 1`, its MPD rewritten to `SegmentBase@indexRange`.
        case singleFile
        /// `$Time$` segment names (video only: ffmpeg names the first AAC segment by its
        /// priming time, which its own MPD does not say).
        case time
    }

    /// Makes the asset with ffmpeg and serves it from `origin` under `/<packaging>/`.
    static func makeAsset(_ packaging: Packaging, in root: URL, origin: TestOrigin) async throws {
        let directory = root.appendingPathComponent(packaging.rawValue)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var arguments = [
            "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=25", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100",
            "-f", "lavfi", "-i", "sine=frequency=660:sample_rate=44100", "-t", "4",
        ]
        switch packaging {
        case .template:
            arguments += [
                "-map", "0:v", "-map", "0:v", "-map", "1:a", "-map", "2:a", "-c:v", "libx264", "-preset", "ultrafast", "-g", "25",
                "-b:v:0", "300k", "-b:v:1", "800k", "-s:v:1", "640x480", "-c:a", "aac", "-b:a", "64k",
                "-metadata:s:a:0", "language=eng", "-metadata:s:a:1", "language=fra",
                "-adaptation_sets", "id=0,streams=v id=1,streams=2 id=2,streams=3", "-use_template", "1", "-use_timeline", "1",
            ]
        case .singleFile:
            arguments += [
                "-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-c:a", "aac", "-b:a", "64k",
                "-single_file", "1", "-global_sidx", "1",
            ]
        case .time:
            arguments += [
                "-map", "0:v", "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-use_template", "1", "-use_timeline", "1",
                "-media_seg_name", "chunk-$RepresentationID$-$Time$.m4s",
            ]
        }
        arguments += ["-seg_duration", "1", "-f", "dash", directory.appendingPathComponent("manifest.mpd").path]
        let made = try await ChildProcess.run(PlaybackPlayersTests.ffmpeg, arguments, timeout: .seconds(120))
        try #require(made.status == 0, "ffmpeg: \(made.output)")
        var manifest = try String(contentsOf: directory.appendingPathComponent("manifest.mpd"), encoding: .utf8)
        if packaging == .singleFile { manifest = try Self.indexedBySidx(manifest, in: directory) }
        let prefix = "/\(packaging.rawValue)"
        origin.serve("\(prefix)/manifest.mpd", Data(manifest.utf8), contentType: "application/dash+xml")
        for file in try FileManager.default.contentsOfDirectory(atPath: directory.path) where file != "manifest.mpd" {
            origin.serve("\(prefix)/\(file)", try Data(contentsOf: directory.appendingPathComponent(file)), contentType: "video/mp4")
        }
    }

    /// ffmpeg 5.1 lists a single file's segments (`SegmentList` with `mediaRange`) even with a
    /// global `sidx`; a packager for on-demand profiles writes `SegmentBase` instead, which this
    /// rewrites it to: the index range is where the file's top-level `sidx` box is.
    static func indexedBySidx(_ manifest: String, in directory: URL) throws -> String {
        var result = manifest
        let lists = try NSRegularExpression(pattern: "<BaseURL>([^<]+)</BaseURL>\\s*<SegmentList[^>]*>.*?</SegmentList>", options: [.dotMatchesLineSeparators])
        for match in lists.matches(in: manifest, range: NSRange(manifest.startIndex..., in: manifest)).reversed() {
            let file = String(manifest[Range(match.range(at: 1), in: manifest)!])
            let bytes = [UInt8](try Data(contentsOf: directory.appendingPathComponent(file)))
            var offset = 0
            var sidx: (start: Int, end: Int)?
            while offset + 8 <= bytes.count {
                let size = Int(bytes[offset]) << 24 | Int(bytes[offset + 1]) << 16 | Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
                if String(decoding: bytes[(offset + 4)..<(offset + 8)], as: UTF8.self) == "sidx" { sidx = (offset, offset + size - 1) }
                guard size >= 8 else { break }
                offset += size
            }
            let index = try #require(sidx, "no sidx in \(file)")
            let replacement = "<BaseURL>\(file)</BaseURL>\n<SegmentBase indexRange=\"\(index.start)-\(index.end)\"><Initialization range=\"0-\(index.start - 1)\"/></SegmentBase>"
            result.replaceSubrange(Range(match.range, in: result)!, with: replacement)
        }
        try #require(result.contains("SegmentBase") && !result.contains("SegmentList"), "\(result)")
        return result
    }

    /// The streams ffprobe finds in `url`: `video 320x240`, `audio fra`, …
    static func streams(_ url: URL) async throws -> [String] {
        let probe = try await ChildProcess.run(PlaybackPlayersTests.ffprobe, [
            "-v", "error", "-show_entries", "stream=codec_type,width,height:stream_tags=language", "-of", "json", url.absoluteString,
        ], timeout: .seconds(60))
        struct Probe: Decodable {
            struct Stream: Decodable {
                var codec_type: String
                var width: Int?
                var height: Int?
                var tags: [String: String]?
            }
            var streams: [Stream]
        }
        let found = try JSONDecoder().decode(Probe.self, from: Data(probe.output.utf8))
        return found.streams.map { stream in
            [stream.codec_type, stream.width.map { "\($0)x\(stream.height ?? 0)" }, stream.tags?["language"]].compactMap { $0 }.joined(separator: " ")
        }
    }

    /// The local MPD's URLs: every `BaseURL`, `media` and `initialization` (namespace and schema
    /// locations are names, not files).
    static func namedFiles(_ manifest: String) throws -> [String] {
        let pattern = try NSRegularExpression(pattern: "(?:media|initialization)=\"([^\"]*)\"|<BaseURL>([^<]*)</BaseURL>")
        return pattern.matches(in: manifest, range: NSRange(manifest.startIndex..., in: manifest)).compactMap { match in
            (Range(match.range(at: 1), in: manifest) ?? Range(match.range(at: 2), in: manifest)).map { String(manifest[$0]) }
        }
    }

    @Test func ffmpegAssetsDownloadAndDecodeInFullOfflineFromTheLocalManifest() async throws {
        guard PlaybackPlayersTests.playersAreInstalled() else { return }
        let root = try createdTemporaryDirectory("backplane-dash")
        defer { try? FileManager.default.removeItem(at: root) }
        let bench = try await DownloadBench.start()
        for packaging in Packaging.allCases {
            try await Self.makeAsset(packaging, in: root, origin: bench.origin)
            // The template asset: the 300 kbit/s video and the French audio only.
            try await bench.engine.downloads.enqueue(DownloadRequest(
                assetId: packaging.rawValue, url: bench.origin.url("/\(packaging.rawValue)/manifest.mpd"), kind: .dash,
                allowedMIMETypes: ["video/mp4"], maxVideoBitrate: 500_000, audioLanguages: packaging == .template ? ["fr"] : nil))
            let asset = try await bench.waitForOutcome(packaging.rawValue, timeout: .seconds(60))
            try #require(asset.state == .completed, "\(packaging): \(String(describing: asset.lastFailure))")
            let local = try #require(asset.localURL)
            #expect(local.lastPathComponent == "index.mpd")
            let manifest = try String(contentsOf: local, encoding: .utf8)
            let named = try Self.namedFiles(manifest)
            #expect(!named.isEmpty && named.allSatisfy { !$0.contains(":") && !$0.hasPrefix("/") }, "\(packaging): \(named)")

            // Offline: the origin is not asked, ffprobe reads the files through the local MPD.
            let before = bench.origin.requests(under: "/\(packaging.rawValue)/").values.reduce(0, +)
            #expect(try await PlaybackPlayersTests.countFrames(local) == PlaybackPlayersTests.frames, "ffprobe \(local.path) (\(packaging))")
            #expect(bench.origin.requests(under: "/\(packaging.rawValue)/").values.reduce(0, +) == before)
            let streams = try await Self.streams(local)
            switch packaging {
            case .template:
                #expect(streams == ["video 320x240", "audio fra"], "\(streams)")
                #expect(bench.origin.requests(under: "/template/chunk-stream1-").isEmpty, "the 800 kbit/s video was fetched")
                #expect(bench.origin.requests(under: "/template/chunk-stream2-").isEmpty, "the English audio was fetched")
            case .singleFile:
                #expect(streams == ["video 320x240", "audio"], "\(streams)")
                // Fetched by ranges, each byte once.
                for file in ["manifest-stream0.mp4", "manifest-stream1.mp4"] {
                    let size = try #require(bench.origin.bytes(at: "/singleFile/\(file)")?.count)
                    #expect(bench.origin.bytesServed("/singleFile/\(file)") == size, "\(file)")
                }
            case .time:
                #expect(streams == ["video 320x240"], "\(streams)")
            }
        }

        // Through the playback server: the local MPD as `application/dash+xml`, played in full.
        let url = try await bench.engine.playback.url(for: Packaging.template.rawValue)
        #expect(try await PlaybackPlayersTests.countFrames(url) == PlaybackPlayersTests.frames, "ffprobe through \(url)")
        await bench.stop()
        try PlaybackPlayersTests.report("dash: ffprobe decoded all \(PlaybackPlayersTests.frames) frames offline from the local MPD of a template+timeline, "
            + "a SegmentBase (sidx) and a $Time$ asset made by ffmpeg, and through the playback server")
    }

    /// A DASH asset still downloading from a slow origin (each segment 400 ms, one file at a time)
    /// plays in full through the playback server: the local MPD from the download's plan, the
    /// segments on disk from disk and the rest from the origin as ffprobe asks.
    @Test func aDASHAssetPlaysInFullWhileItDownloadsFromASlowOrigin() async throws {
        guard PlaybackPlayersTests.playersAreInstalled() else { return }
        let root = try createdTemporaryDirectory("backplane-dash-slow")
        defer { try? FileManager.default.removeItem(at: root) }
        let bench = try await DownloadBench.start(options: { $0.parallelFiles = 1 })
        try await Self.makeAsset(.template, in: root, origin: bench.origin)
        let segments = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("template").path).filter { $0.hasPrefix("chunk-") }
        for segment in segments { bench.origin.inject(.delay(.milliseconds(400)), at: "/template/\(segment)") }
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "slow", url: bench.origin.url("/template/manifest.mpd"), kind: .dash, maxVideoBitrate: 500_000, audioLanguages: ["fr"]))
        let url = try await PlaybackWhileDownloadingTests.urlWhileDownloading("slow", bench)
        #expect(url.lastPathComponent == "index.mpd")
        #expect(try await PlaybackPlayersTests.countFrames(url) == PlaybackPlayersTests.frames, "ffprobe through \(url) while it downloads")
        #expect(try await bench.waitForOutcome("slow", timeout: .seconds(60)).state == .completed)
        await bench.stop()
    }
}
