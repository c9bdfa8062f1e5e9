import AsyncHTTPClient
import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// `backplane-harness play ASSET --serve` from outside: one JSON line with the URL, then the
/// asset served with the backplane gone, until SIGTERM.
extension HarnessEndToEndTests {
    /// `play ASSET --serve` of the phone's data directory: the serving process (the caller ends
    /// it), and its JSON line with the URL once it is printed.
    static func startServing(_ assetId: String, harness: Harness, root: URL) async throws -> (ChildProcess, [String: JSONValue], URL) {
        let serving = try ChildProcess(
            harness.binary, ["play", assetId, "--serve", "--data-dir", root.appendingPathComponent("phone").path], environment: harness.environment)
        do {
            let output = try await serving.waitForOutput(containing: "\"url\"", timeout: .seconds(60))
            let line = try #require(output.split(separator: "\n").first { $0.contains("\"url\"") })
            let json = try JSONDecoder().decode([String: JSONValue].self, from: Data(line.utf8))
            return (serving, json, try #require(json["url"]?.stringValue.flatMap(URL.init(string:)), "\(line)"))
        } catch {
            serving.terminate()
            throw error
        }
    }

    @Test func theHarnessServesADownloadedAssetWithoutTheBackplaneUntilSignalled() async throws {
        let root = temporaryDirectory("backplane-harness-play")
        defer { try? FileManager.default.removeItem(at: root) }
        let backplane = try await ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let film = TestOrigin.content(300_000)
        origin.serve("/film.mp4", film)
        let harness = try backplane.harness(user: "viewer")
        let downloaded = try await harness.run(
            ["download", "--asset-id", "film", "--url", origin.url("/film.mp4").absoluteString, "--wait"], device: "phone")
        #expect(downloaded.status == 0, "\(downloaded.json)")

        // No backplane from here on.
        backplane.process.terminate()
        let (serving, json, url) = try await Self.startServing("film", harness: harness, root: root)
        defer { serving.terminate() }
        #expect(json["rights"] == .string("valid") && json["playable"] == .bool(true), "\(json)")
        #expect(url.host == "127.0.0.1")

        let whole = try await PlaybackServerTests.get(url)
        #expect(whole.status == 200 && whole.body == film)
        let part = try await PlaybackServerTests.get(url, range: "bytes=1000-1999")
        #expect(part.status == 206 && part.body == film[1000..<2000])

        serving.signal(SIGTERM)
        #expect(try await serving.waitForExit(timeout: .seconds(30)) == 0, "\(serving.output)")
        // An asset that is not on the device may not be played: exit 10, as `play` says.
        let missing = try await harness.run(["play", "nothing", "--serve"], device: "phone")
        #expect(missing.status == 10, "\(missing.json)")
    }

    @Test func theHarnessServesAQueuedAssetWhileItDownloads() async throws {
        let root = temporaryDirectory("backplane-harness-play-queued")
        defer { try? FileManager.default.removeItem(at: root) }
        let backplane = try await ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let film = TestOrigin.content(300_000, seed: 9)
        origin.serve("/slow.mp4", film)
        origin.inject(.delay(.seconds(3)), at: "/slow.mp4")
        let harness = try backplane.harness(user: "viewer")
        let queued = try await harness.run(["download", "--asset-id", "slow", "--url", origin.url("/slow.mp4").absoluteString], device: "phone")
        #expect(queued.status == 0, "\(queued.json)")

        let (serving, json, url) = try await Self.startServing("slow", harness: harness, root: root)
        defer { serving.terminate() }
        #expect(json["rights"] == .string("valid") && json["playable"] == .bool(true), "\(json)")
        // Asked for before the download's own answer arrived: passed through from the origin.
        let part = try await PlaybackServerTests.get(url, range: "bytes=1000-1999")
        #expect(part.status == 206 && part.body == film[1000..<2000])
        #expect(origin.requests("/slow.mp4") == 2, "the download's request and the player's")

        serving.signal(SIGTERM)
        #expect(try await serving.waitForExit(timeout: .seconds(30)) == 0, "\(serving.output)")
    }
}
