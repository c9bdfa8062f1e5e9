import Backplane
import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The harness and the server killed in the middle of their work: nothing acknowledged is lost,
/// nothing is done twice, and a download goes on where it stopped.
extension HarnessEndToEndTests {
    @Test func anEnqueuedCommandSurvivesAServerCrashAndRunsExactlyOnce() async throws {
        let root = temporaryDirectory("backplane-crash")
        defer { try? FileManager.default.removeItem(at: root) }
        let backplane = try await ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        let harness = try backplane.harness(user: "crash-user")

        let deviceId = try await harness.register(device: "d1")
        let source = root.appendingPathComponent("movie.mp4")
        try Data(repeating: 1, count: 10_000).write(to: source)
        for asset in ["a1", "a2"] {
            #expect(try await harness.run(["add-file", "--asset", asset, "--file", source.path], device: "d1").status == 0)
        }

        let created = try await backplane.admin("POST", "/v1/admin/commands", body: #"{"type": "wipe", "deviceId": "\#(deviceId)"}"#)
        let commandId = try #require(try JSONDecoder.wire.decode(CommandList.self, from: created).commands.first?.commandId)

        // The server dies without any chance to clean up, then comes back on the same port.
        backplane.process.signal(SIGKILL)
        #expect(try await backplane.process.waitForExit(timeout: .seconds(30)) != 0)
        try await backplane.restart()  // the defer above stops whichever process runs last

        let (synced, sync) = try await harness.run(["sync"], device: "d1")
        #expect(synced == 0)
        #expect(Self.events(sync).filter { $0 == "remoteWipe" }.count == 1)
        let (_, assets) = try await harness.run(["assets"], device: "d1")
        #expect(assets["assets"] == .array([]))
        let command = try JSONDecoder.wire.decode(Command.self, from: try await backplane.admin("GET", "/v1/admin/commands/\(commandId)"))
        #expect(command.state == .succeeded)

        // Later syncs do not run it again.
        let (_, again) = try await harness.run(["sync"], device: "d1")
        #expect(!Self.events(again).contains("remoteWipe"))
    }

    @Test func aServerKilledInTheMiddleOfAnEventLoadLosesNothingAcknowledgedAndStoresNothingTwice() async throws {
        let root = temporaryDirectory("backplane-events-kill")
        defer { try? FileManager.default.removeItem(at: root) }
        let backplane = try await ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        // The test reads the server's database beside it (WAL readers do not block the writer).
        let reader = BackplaneServices(store: try SQLiteStore(directory: URL(fileURLWithPath: backplane.dataDir)))
        func storedLoad() async throws -> [StoredEvent] {
            try await storedEvents(reader, applicationId: backplane.applicationId, EventFilter(type: .custom))
        }

        let total = 1500
        let engine = BackplaneEngine(configuration: BackplaneClientConfiguration(
            backplaneURL: URL(string: backplane.baseURL)!, appKeyId: backplane.keyId, appKeySecret: backplane.secret,
            userId: "loader", dataDirectory: root.appendingPathComponent("sdk"),
            sync: SyncOptions(
                interval: .seconds(3600), retry: RetryPolicy(initial: .milliseconds(100), maximum: .milliseconds(500)),
                requestTimeout: .seconds(3), useWakeUpChannel: false),
            eventLog: EventLogOptions(batchSize: 20, uploadThreshold: 20)))
        for index in 1...total { try engine.eventLogger.log(.custom(name: "load", number: Double(index))) }
        try await engine.start()

        // Kill -9 as soon as the load is under way.
        var storedAtKill = 0
        let deadline = ContinuousClock.now + .seconds(30)
        while storedAtKill == 0, ContinuousClock.now < deadline {
            storedAtKill = try await storedLoad().count
            if storedAtKill == 0 { try await Task.sleep(for: .milliseconds(2)) }
        }
        backplane.process.signal(SIGKILL)
        _ = try await backplane.process.waitForExit(timeout: .seconds(10))
        #expect(storedAtKill > 0 && storedAtKill < total, "the kill did not land in the middle of the load: \(storedAtKill) of \(total)")
        let queuedAtKill = try engine.eventLogger.queuedCount()

        // Everything the server acknowledged before dying is still there.
        let survived = try await storedLoad().count
        #expect(survived >= total - queuedAtKill, "acknowledged events were lost: \(survived) stored, \(queuedAtKill) still queued")

        try await backplane.restart()
        let drained = ContinuousClock.now + .seconds(60)
        while try engine.eventLogger.queuedCount() > 0, ContinuousClock.now < drained {
            try await Task.sleep(for: .milliseconds(50))
        }
        await engine.shutdown()
        let stored = try await storedLoad()
        #expect(stored.count == total)
        #expect(Set(stored.map(\.event.sequence)).count == total)
        #expect(Set(stored.compactMap(\.event.content.customNumber)) == Set((1...total).map(Double.init)))
    }

    /// `download --wait` in a harness process killed with SIGKILL mid-download, then run again:
    /// it completes from where it stopped, and the origin served little more than the asset.
    @Test func aDownloadKilledMidwayCompletesWhenTheHarnessRunsAgain() async throws {
        let root = temporaryDirectory("backplane-harness-download")
        defer { try? FileManager.default.removeItem(at: root) }
        let backplane = try await ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        let origin = try await TestOrigin.start()
        let segments = 60
        let hls = TestHLSAsset(serving: origin, segments: segments, segmentBytes: 50_000)
        // Slow enough that the kill lands in the middle.
        origin.inject(.delay(.milliseconds(40)), at: "/hls/low/segments.mp4")
        for index in 0..<segments { origin.inject(.delay(.milliseconds(40)), at: "/hls/audio/en/\(index).aac") }
        let harness = try backplane.harness(user: "downloader")
        let device = root.appendingPathComponent("phone").path
        let arguments = [
            "download", "--asset-id", "show", "--url", origin.url("/hls/master.m3u8").absoluteString, "--hls",
            "--max-bitrate", "0", "--audio", "en", "--subtitles", "", "--mime", "video/mp4", "--mime", "audio/aac", "--wait",
            "--data-dir", device,
        ]

        let first = try ChildProcess(harness.binary, arguments, environment: harness.environment)
        defer { first.terminate() }
        let deadline = ContinuousClock.now + .seconds(60)
        // The audio's segments are asked for one by one (the video's byte ranges of one file
        // go in few requests): the kill lands once 15 of them were.
        let audio = { origin.requests(under: "/hls/audio/en/").values.reduce(0, +) }
        while audio() < 15, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        first.signal(SIGKILL)
        _ = try await first.waitForExit(timeout: .seconds(10))
        #expect(audio() < segments, "the kill came too late to test a resume")

        let second = try await ChildProcess.run(harness.binary, arguments, environment: harness.environment, timeout: .seconds(120))
        #expect(second.status == 0, "\(second.output)")
        let result = try Harness.result(second.output)
        #expect(result["state"] == .string("completed"))
        guard case .int(let size) = result["bytesDownloaded"], case .string(let path) = result["path"] else {
            Issue.record("no size or path: \(result)")
            return
        }
        // No file finished before the kill was fetched again: only those in flight then were
        // asked for twice, at most as many being fetched as the engine had reached (16 over
        // HTTP/1.1) and as many fetched but still waiting for their rename (a small file
        // without its resume information starts over), and of the video's run of byte ranges
        // the part being written; so the origin served the asset once and at most those again.
        let requests = origin.requests(under: "/hls/")
        var again = 0
        for (path, count) in requests where path != "/hls/low/segments.mp4" { again += count - 1 }
        #expect(again <= 32, "\(requests.filter { $0.value > 1 })")
        let served = origin.bytesServed(under: "/hls/low/") + origin.bytesServed(under: "/hls/audio/en/")
            + origin.bytesServed(under: "/hls/keys/")
        let largestFile = (0..<segments).map { hls.videoSegment("low", $0).count }.max() ?? 0
        #expect(served <= Int(size) + (again + 1) * largestFile, "served \(served) for \(size), \(again) files again")
        // What is on disk is what the origin served, video and audio.
        try HarnessKillTests.expectWhole(hls, index: URL(fileURLWithPath: path), segments: segments)

        // A captive portal's page where a video was expected: exit 9 with the reason, nothing kept.
        origin.serve("/portal.mp4", Data("<html>Sign in to the hotel Wi-Fi</html>".utf8), contentType: "text/html")
        let portal = [
            "download", "--asset-id", "movie", "--url", origin.url("/portal.mp4").absoluteString, "--mime", "video/mp4", "--wait",
            "--data-dir", device,
        ]
        let refused = try await ChildProcess.run(harness.binary, portal, environment: harness.environment)
        #expect(refused.status == 9)
        #expect(refused.output.contains("text/html"), "\(refused.output)")
        let queue = try await harness.run(["queue"], device: "phone")
        guard case .array(let queued) = queue.json["queue"], case .object(let movie) = queued.first else {
            Issue.record("no queue: \(queue.json)")
            return
        }
        #expect(movie["state"] == .string("failed"))
        // The same command again tries the asset again (its retries cleared) and ends as the first
        // did, rather than waiting in silence on an asset that will never move.
        let servedOnce = origin.requests("/portal.mp4")
        let retried = try await ChildProcess.run(harness.binary, portal, environment: harness.environment, timeout: .seconds(60))
        #expect(retried.status == 9, "\(retried.output)")
        #expect(origin.requests("/portal.mp4") > servedOnce, "the failed asset was not tried again")
        let stored = FileManager.default.subpaths(atPath: root.appendingPathComponent("phone/content").path) ?? []
        #expect(!stored.contains { $0.contains("portal.mp4") }, "\(stored.filter { $0.contains("portal") })")
        await origin.stop()
    }
}
