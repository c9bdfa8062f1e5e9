import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// Offline playback, for real: an asset made by ffmpeg and downloaded by the built harness, then
/// played in a network namespace that has nothing but its own loopback (`unshare -n`), where
/// neither the backplane nor the origin exists: `play --serve` serves it, ffprobe counts every
/// frame and GStreamer plays it to the end. Needs root for the namespace; CI
/// (BACKPLANE_REQUIRE_PLAYERS=1) fails it when it cannot run, and checks its report
/// (BACKPLANE_OFFLINE_PLAY_REPORT).
extension HarnessEndToEndTests {
    @Test func aDownloadPlaysInANetworkNamespaceWithLoopbackOnly() async throws {
        let unshare = URL(fileURLWithPath: "/usr/bin/unshare")
        guard PlaybackPlayersTests.playersInstalled, FileManager.default.isExecutableFile(atPath: unshare.path), getuid() == 0 else {
            let message = "ffmpeg, GStreamer, unshare or root is missing: the offline playback test did not run"
            if ProcessInfo.processInfo.environment["BACKPLANE_REQUIRE_PLAYERS"] == "1" { Issue.record(Comment(rawValue: message)) }
            print("warning: \(message)")
            return
        }
        let root = try createdTemporaryDirectory("backplane-offline-play")
        defer { try? FileManager.default.removeItem(at: root) }
        let backplane = try await ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        let origin = try await TestOrigin.start()
        try await PlaybackPlayersTests.makeAsset(.tsAES128, in: root.appendingPathComponent("media"), origin: origin)
        let harness = try backplane.harness(user: "traveller")
        let downloaded = try await harness.run(
            ["download", "--asset-id", "show", "--url", origin.url("/tsAES128/master.m3u8").absoluteString, "--hls", "--wait"], device: "tablet")
        #expect(downloaded.status == 0, "\(downloaded.json)")
        await origin.stop()
        backplane.process.terminate()

        // Inside the namespace: loopback up, the harness serving, then the two players.
        let script = root.appendingPathComponent("offline.sh")
        try """
            set -u
            ip link set lo up
            echo "interfaces: $(ip -o link show | cut -d: -f2 | tr -d ' ' | tr '\\n' ' ')"
            "$HARNESS" play show --serve --data-dir "$DATA" > "$OUT" 2>&1 &
            serving=$!
            for _ in $(seq 300); do grep -q '"url"' "$OUT" && break; sleep 0.1; done
            url=$(sed -n 's/.*"url":"\\([^"]*\\)".*/\\1/p' "$OUT" | head -n 1 | sed 's#\\\\/#/#g')
            echo "url: $url"
            echo "frames: $(/usr/bin/ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames -of csv=p=0 "$url")"
            timeout 120 /usr/bin/gst-launch-1.0 -q playbin "uri=$url" video-sink=fakesink audio-sink=fakesink
            echo "gstreamer: $?"
            kill -TERM "$serving"
            wait "$serving"
            echo "harness: $?"
            """.write(to: script, atomically: true, encoding: .utf8)
        var environment = harness.environment
        environment["HARNESS"] = harness.binary.path
        environment["DATA"] = root.appendingPathComponent("tablet").path
        environment["OUT"] = root.appendingPathComponent("serve.out").path
        let run = try await ChildProcess.run(unshare, ["-n", "/bin/sh", script.path], environment: environment, timeout: .seconds(300))
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("interfaces: lo \n"), "only loopback in the namespace: \(run.output)")
        #expect(run.output.contains("url: http://127.0.0.1:"), "\(run.output)")
        #expect(run.output.contains("frames: \(PlaybackPlayersTests.frames)\n"), "\(run.output)")
        #expect(run.output.contains("gstreamer: 0\n"), "\(run.output)")
        #expect(run.output.contains("harness: 0"), "\(run.output)")
        if let report = ProcessInfo.processInfo.environment["BACKPLANE_OFFLINE_PLAY_REPORT"] {
            try "offline playback: in a namespace with loopback only, play --serve, ffprobe (\(PlaybackPlayersTests.frames) frames) and GStreamer passed\n"
                .write(toFile: report, atomically: true, encoding: .utf8)
        }
    }
}
