import ClientSDK
import Foundation
import Testing
import TestSupport

extension HarnessEndToEndTests {
    /// `backplane-harness download --dash` downloads an ffmpeg-made DASH asset through the built
    /// server and harness, with the lowest video and the French audio, after `--estimate` gave its
    /// size (and that of a part of it, `--from`) without queueing it; `--hls --dash` is refused.
    @Test func theHarnessDownloadsADASHAsset() async throws {
        guard PlaybackPlayersTests.playersAreInstalled() else { return }
        let root = try createdTemporaryDirectory("harness-dash")
        defer { try? FileManager.default.removeItem(at: root) }
        let backplane = try await ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        let origin = try await TestOrigin.start()
        try await DASHDownloadTests.makeAsset(.template, in: root.appendingPathComponent("media"), origin: origin)
        let harness = try backplane.harness(user: "viewer")
        let url = origin.url("/template/manifest.mpd").absoluteString

        let both = try await harness.run(["download", "--asset-id", "show", "--url", url, "--hls", "--dash"], device: "phone")
        #expect(both.status != 0, "\(both.json)")

        // Its size, without queueing it; under a 1,000-byte limit, what it lacks.
        let estimate = try await harness.run(["download", "--asset-id", "show", "--url", url, "--dash", "--max-bitrate", "0", "--estimate"], device: "phone")
        #expect(estimate.status == 0, "\(estimate.json)")
        let bytes = try #require(estimate.json["bytes"]?.intValue, "\(estimate.json)")
        #expect(bytes > 50_000 && estimate.json["shortfall"] == nil)
        let tight = try await harness.run(
            ["download", "--asset-id", "show", "--url", url, "--dash", "--max-bitrate", "0", "--estimate", "--max-storage", "1000"], device: "phone")
        #expect(tight.json["shortfall"]?.intValue == bytes - 1_000, "\(tight.json)")
        #expect(origin.requests(under: "/template/chunk-").isEmpty, "the estimate fetched segments")
        // Part of it (from 3 s, the last of its four 1 s segments): about a quarter; a range
        // that ends before it starts is refused.
        let part = try await harness.run(["download", "--asset-id", "show", "--url", url, "--dash", "--max-bitrate", "0", "--estimate", "--from", "3"], device: "phone")
        let partBytes = try #require(part.json["bytes"]?.intValue, "\(part.json)")
        #expect(partBytes > 0 && partBytes < bytes / 2, "\(partBytes) of \(bytes)")
        let backwards = try await ChildProcess.run(harness.binary, [
            "download", "--asset-id", "show", "--url", url, "--dash", "--from", "3", "--to", "1", "--data-dir", root.appendingPathComponent("phone").path,
        ], environment: harness.environment)
        #expect(backwards.status != 0 && backwards.output.contains("invalidInput: The time range's end must come after its start"), "\(backwards.output)")

        let downloaded = try await harness.run(
            ["download", "--asset-id", "show", "--url", url, "--dash", "--max-bitrate", "0", "--audio", "fr", "--subtitles", "", "--wait"], device: "phone")
        #expect(downloaded.status == 0, "\(downloaded.json)")
        #expect(downloaded.json["state"] == .string("completed"))
        // update-url: a queued asset's URL swapped for one of the same media (another query string).
        try #require(try await harness.run(["set-downloads", "off"], device: "phone").status == 0)
        let queued = try await harness.run(["download", "--asset-id", "again", "--url", url + "?token=1", "--dash"], device: "phone")
        #expect(queued.status == 0, "\(queued.json)")
        let updated = try await harness.run(["update-url", "--asset-id", "again", "--url", url + "?token=2"], device: "phone")
        #expect(updated.status == 0, "\(updated.json)")
        guard case .array(let queue)? = updated.json["queue"], case .object(let again)? = queue.first else {
            Issue.record("no queue in \(updated.json)")
            return
        }
        #expect(again["url"] == .string(url + "?token=2"), "\(updated.json)")

        // The lower video (stream 0) and the French audio (stream 3) only.
        let fetched = origin.requests(under: "/template/chunk-")
        #expect(Set(fetched.keys.map { $0.components(separatedBy: "-")[1] }) == ["stream0", "stream3"], "\(fetched.keys.sorted())")
        await origin.stop()
    }
}
