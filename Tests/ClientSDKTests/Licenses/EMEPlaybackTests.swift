import Foundation
import BackplaneWire
import Testing
import TestSupport

/// A protected download played by a real EME player, offline: Shaka Packager encrypts a clip
/// with a key the backplane generated, the built harness downloads it with its license, and in a
/// network namespace with loopback only (no backplane, no origin) headless Chromium plays it from
/// `play --serve` through MSE and an `org.w3.clearkey` temporary session whose license is the
/// playback server's (`licenseUrl`). Then, in the same serving run, the expiry after play passes:
/// a new play gets the media but a 403 for the license, `waitingforkey`, and no frame. Last, the
/// device's clock set back: the harness refuses to serve (`untrustedTime`).
///
/// Needs root (the namespace), ffmpeg, Shaka Packager, Chromium, chromedriver and Selenium; CI
/// (BACKPLANE_REQUIRE_PLAYERS) fails it when any is missing and checks its `eme:` report line.
extension HarnessEndToEndTests {
    static let emePlayer = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("EME/eme_play.py")
    /// The window's expiry after play: long enough for the first play to get its license on a
    /// busy machine, short enough to wait for.
    static let emeExpiryAfterPlay = 20

    @Test func aProtectedDownloadPlaysInChromiumOfflineUntilItsLicenseEnds() async throws {
        let unshare = URL(fileURLWithPath: "/usr/bin/unshare")
        let browser = ["/usr/bin/chromium", "/usr/bin/chromedriver"].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
        guard let packager = try await ClearKeyDownloadTests.toolsAreInstalled() else { return }
        guard browser, FileManager.default.isExecutableFile(atPath: unshare.path), getuid() == 0 else {
            let message = "Chromium, chromedriver, unshare or root is missing: the EME playback test did not run"
            if ProcessInfo.processInfo.environment["BACKPLANE_REQUIRE_PLAYERS"] == "1" { Issue.record(Comment(rawValue: message)) }
            print("warning: \(message)")
            return
        }
        let root = try createdTemporaryDirectory("backplane-eme")
        defer { try? FileManager.default.removeItem(at: root) }
        let backplane = try await ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        try await backplane.admin("PATCH", "/v1/admin/settings", body: #"{"expiryAfterPlaySeconds": \#(Self.emeExpiryAfterPlay)}"#)
        let generated = try await backplane.admin("POST", "/v1/admin/assets/film/keys")
        let key = try JSONDecoder.wire.decode(GeneratedContentKey.self, from: generated)
        let origin = try await TestOrigin.start()
        _ = try await ClearKeyDownloadTests.packageClip(packager, key: key, in: root, serving: "/film", from: origin)
        let harness = try backplane.harness(user: "renter")
        let downloaded = try await harness.run(
            ["download", "--asset-id", "film", "--url", origin.url("/film/manifest.mpd").absoluteString, "--dash", "--wait"], device: "laptop")
        #expect(downloaded.status == 0, "\(downloaded.json)")
        await origin.stop()
        backplane.process.terminate()

        let script = root.appendingPathComponent("eme.sh")
        try """
            set -u
            ip link set lo up
            echo "interfaces: $(ip -o link show | cut -d: -f2 | tr -d ' ' | tr '\\n' ' ')"
            field() { sed -n "s/.*\\"$1\\":\\"\\([^\\"]*\\)\\".*/\\1/p" "$OUT" | head -n 1 | sed 's#\\\\/#/#g'; }
            "$HARNESS" play film --serve --data-dir "$DATA" > "$OUT" 2>&1 &
            serving=$!
            for _ in $(seq 300); do grep -q '"licenseUrl"' "$OUT" && break; sleep 0.1; done
            url=$(field url); license=$(field licenseUrl)
            echo "url: $url"
            started=$(date +%s)
            printf 'first play: %s\\n' "$(python3 "$PLAYER" --mpd "$url" --license "$license" --expect play --seconds 3)"
            # The expiry after play runs from the first play's first request.
            sleep $(( EXPIRY + 2 - ($(date +%s) - started) ))
            printf 'after expiry: %s\\n' "$(python3 "$PLAYER" --mpd "$url" --license "$license" --expect refused --seconds 3)"
            kill -TERM "$serving"
            wait "$serving"
            echo "harness: $?"
            "$HARNESS" play film --serve --data-dir "$DATA" --clock-offset=-172800 > "$OUT" 2>&1
            echo "clock set back: $? $(cat "$OUT")"
            """.write(to: script, atomically: true, encoding: .utf8)
        var environment = harness.environment
        environment["HARNESS"] = harness.binary.path
        environment["PLAYER"] = Self.emePlayer.path
        environment["EXPIRY"] = String(Self.emeExpiryAfterPlay)
        environment["DATA"] = root.appendingPathComponent("laptop").path
        environment["OUT"] = root.appendingPathComponent("serve.out").path
        let run = try await ChildProcess.run(unshare, ["-n", "/bin/sh", script.path], environment: environment, timeout: .seconds(400))
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("interfaces: lo \n"), "only loopback in the namespace: \(run.output)")
        let first = try Self.playerReport(run.output, after: "first play: ")
        #expect(first["passed"] == .bool(true), "\(run.output)")
        #expect((first["currentTime"]?.number ?? 0) >= 3 && (first["frames"]?.number ?? 0) > 0, "\(first)")
        #expect(first["licenseStatus"]?.number == 200 && first["keysLoaded"] == .bool(true), "\(first)")
        let expired = try Self.playerReport(run.output, after: "after expiry: ")
        #expect(expired["passed"] == .bool(true), "\(run.output)")
        #expect(expired["licenseStatus"]?.number == 403 && expired["waitingForKey"] == .bool(true), "\(expired)")
        #expect(expired["frames"]?.number == 0 && (expired["segments"]?.number ?? 0) > 0, "the media was served, not its key: \(expired)")
        #expect(expired["licenseReason"]?.stringValue?.contains("expired") == true, "\(expired)")
        #expect(run.output.contains("harness: 0"), "\(run.output)")
        #expect(run.output.contains("clock set back: 10 ") && run.output.contains("untrustedTime"), "\(run.output)")
        try PlaybackPlayersTests.report("eme: Chromium played a CENC download offline through play --serve and its ClearKey license "
            + "(\(first["currentTime"]?.number ?? 0) s, \(Int(first["frames"]?.number ?? 0)) frames); after its expiry: 403, waitingforkey, no frame")
    }

    /// The JSON line eme_play.py printed after `label`.
    static func playerReport(_ output: String, after label: String) throws -> [String: JSONValue] {
        let line = try #require(output.split(separator: "\n").first { $0.hasPrefix(label) }, "no '\(label)' line: \(output)")
        return try JSONDecoder().decode([String: JSONValue].self, from: Data(line.dropFirst(label.count).utf8))
    }
}

extension JSONValue {
    /// An integer or a fraction, as a Double.
    fileprivate var number: Double? {
        switch self {
        case .int(let value): Double(value)
        case .double(let value): value
        default: nil
        }
    }
}
