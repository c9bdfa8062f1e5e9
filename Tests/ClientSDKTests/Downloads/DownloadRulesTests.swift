import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// The download queue and the rules around it: order, pause, removal, the app's switch, the
/// backplane's download flag, storage and asset limits, and remote commands.
@Suite struct DownloadRulesTests {
    private func files(under directory: URL) -> [URL] {
        FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)?
            .compactMap { $0 as? URL }.filter { !$0.hasDirectoryPath } ?? []
    }

    @Test func theQueueKeepsItsOrderAcrossRestartsAndPausedAssetsWait() async throws {
        let dataDirectory = temporaryDirectory("sdk-download-queue")
        let bench = try await DownloadBench.start(dataDirectory: dataDirectory)
        let downloads = bench.engine.downloads
        try await downloads.setEnabled(false)
        for name in ["a", "b", "c"] {
            bench.origin.serve("/\(name).mp4", TestOrigin.content(50_000, seed: UInt8(name.utf8.first!)))
            try await downloads.enqueue(DownloadRequest(assetId: name, url: bench.origin.url("/\(name).mp4")))
        }
        try await downloads.enqueue(DownloadRequest(assetId: "first", url: bench.origin.url("/a.mp4")), at: 0)
        try await downloads.move(assetId: "c", to: 1)
        try await downloads.pause(assetId: "b")
        #expect(try await downloads.queue().map(\.assetId) == ["first", "c", "a", "b"])
        // Queueing an asset again changes nothing.
        try await downloads.enqueue(DownloadRequest(assetId: "a", url: bench.origin.url("/a.mp4")), at: 0)
        #expect(try await downloads.queue().map(\.assetId) == ["first", "c", "a", "b"])
        #expect(bench.origin.requests(under: "/").isEmpty, "nothing is fetched while switched off")
        await bench.engine.shutdown()

        // The queue, the pause and the switch survive a restart.
        let second = try await DownloadBench.start(dataDirectory: dataDirectory, server: bench.server, origin: bench.origin)
        #expect(try await second.engine.downloads.queue().map(\.assetId) == ["first", "c", "a", "b"])
        #expect(try await second.engine.downloads.isEnabled() == false)
        #expect(try await second.engine.downloads.asset("b")?.state == .paused)
        try await second.engine.downloads.setEnabled(true)
        for assetId in ["first", "c", "a"] { #expect(try await second.waitForOutcome(assetId).state == .completed) }
        // In queue order, one at a time.
        let started = second.events.all.compactMap { event -> String? in
            if case .downloadStarted(let assetId) = event { assetId } else { nil }
        }
        #expect(started == ["first", "c", "a"])
        #expect(try await second.engine.downloads.queue().map(\.assetId) == ["b"])
        try await second.engine.downloads.resume(assetId: "b")
        #expect(try await second.waitForOutcome("b").state == .completed)
        await second.stop()
    }

    @Test func removingAnAssetStopsItsDownloadAndDeletesItsFiles() async throws {
        let bench = try await DownloadBench.start { $0.parallelFiles = 1; $0.adaptsConcurrency = false }
        _ = TestHLSAsset(serving: bench.origin, segments: 30)
        // The audio's segments are files of their own, each asked for alone (the video's byte
        // ranges of one file go in one request).
        for index in 0..<30 { bench.origin.inject(.delay(.milliseconds(50)), at: "/hls/audio/en/\(index).aac") }
        // Counted as they arrive: an answer held by the origin's delay is counted when asked.
        let segments = { bench.origin.asked(under: "/hls/audio/en/").count }
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "show", url: bench.origin.url("/hls/master.m3u8"), kind: .hls, maxVideoBitrate: 0, audioLanguages: ["en"],
            subtitleLanguages: []))
        try await bench.wait("the download to start") { segments() >= 2 }
        try await bench.engine.downloads.remove(assetId: "show")
        #expect(try await bench.engine.downloads.asset("show") == nil)
        #expect(files(under: bench.dataDirectory.appendingPathComponent("content")).isEmpty)
        // A request cancelled on its way may still reach the origin; after that, nothing does.
        try await Task.sleep(for: .milliseconds(100))
        let fetched = segments()
        #expect(fetched < 30)
        try await Task.sleep(for: .milliseconds(400))
        #expect(segments() == fetched, "nothing is fetched after the removal")
        // A completed asset is removed with its files too; an unknown one is an error.
        bench.origin.serve("/short.mp4", TestOrigin.content(10_000))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "short", url: bench.origin.url("/short.mp4")))
        #expect(try await bench.waitForOutcome("short").state == .completed)
        try await bench.engine.downloads.remove(assetId: "short")
        #expect(try await bench.engine.downloads.completed().isEmpty)
        #expect(files(under: bench.dataDirectory.appendingPathComponent("content")).isEmpty)
        await #expect(throws: BackplaneClientError.self) { try await bench.engine.downloads.remove(assetId: "short") }
        await bench.stop()
    }

    @Test func storageRulesBlockTheQueueAndFreedSpaceLetsItGoOn() async throws {
        let bench = try await DownloadBench.start { $0.maxStorage = 300_000 }
        bench.origin.serve("/one.mp4", TestOrigin.content(200_000, seed: 1))
        bench.origin.serve("/two.mp4", TestOrigin.content(200_000, seed: 2))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "one", url: bench.origin.url("/one.mp4")))
        #expect(try await bench.waitForOutcome("one").state == .completed)
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "two", url: bench.origin.url("/two.mp4")))
        try await bench.wait("the queue to block on storage") {
            try await bench.engine.downloads.asset("two")?.state == .blocked(.storage)
        }
        try await bench.events.wait(for: "downloadsBlocked") { if case .downloadsBlocked(.storage) = $0 { true } else { false } }
        #expect(bench.events.count("downloadError") == 0, "a storage rule blocks; it is not an error")
        #expect(try await bench.engine.downloads.asset("two")?.errorCount == 0)
        // Nothing over the limit was written.
        let written = files(under: bench.dataDirectory.appendingPathComponent("content"))
            .reduce(0) { $0 + ((try? $1.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0) }
        #expect(written <= 300_000)

        try await bench.engine.downloads.remove(assetId: "one")
        let two = try await bench.waitForOutcome("two")
        #expect(two.state == .completed)
        #expect(try Data(contentsOf: try #require(two.localURL)) == TestOrigin.content(200_000, seed: 2))
        await bench.stop()
    }

    @Test func theHeadroomRuleBlocksWhenTheVolumeIsTooFull() async throws {
        // More headroom than any test machine has free.
        let bench = try await DownloadBench.start { $0.headroom = Int64.max / 2 }
        bench.origin.serve("/one.mp4", TestOrigin.content(10_000))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "one", url: bench.origin.url("/one.mp4")))
        try await bench.wait("the queue to block on storage") {
            try await bench.engine.downloads.status() == .blocked(.storage)
        }
        #expect(bench.origin.requests("/one.mp4") == 0)
        await bench.stop()
    }

    @Test func theAssetLimitsBlockTheQueue() async throws {
        let bench = try await DownloadBench.start { $0.maxDownloadedAssets = 1 }
        for name in ["one", "two"] {
            bench.origin.serve("/\(name).mp4", TestOrigin.content(10_000))
            try await bench.engine.downloads.enqueue(DownloadRequest(assetId: name, url: bench.origin.url("/\(name).mp4")))
        }
        #expect(try await bench.waitForOutcome("one").state == .completed)
        try await bench.wait("the queue to block at the asset limit") {
            try await bench.engine.downloads.status() == .blocked(.maxDownloadedAssets)
        }
        #expect(bench.origin.requests("/two.mp4") == 0)
        try await bench.engine.downloads.remove(assetId: "one")
        #expect(try await bench.waitForOutcome("two").state == .completed)
        await bench.stop()
    }

    @Test func theApplicationsMaxDownloadsPerDeviceBlocksTheQueue() async throws {
        let bench = try await DownloadBench.start()
        _ = try await bench.server.services.applications.updateSettings(
            applicationId: bench.server.applicationId, ApplicationSettingsUpdate { $0.maxDownloadsPerDevice = 1 })
        try await bench.engine.sync()
        for name in ["one", "two"] {
            bench.origin.serve("/\(name).mp4", TestOrigin.content(10_000))
            try await bench.engine.downloads.enqueue(DownloadRequest(assetId: name, url: bench.origin.url("/\(name).mp4")))
        }
        #expect(try await bench.waitForOutcome("one").state == .completed)
        try await bench.wait("the queue to block at the application's limit") {
            try await bench.engine.downloads.asset("two")?.state == .blocked(.maxDownloadsPerDevice)
        }
        // Unlimited again (-1): the queue goes on at the next sync.
        _ = try await bench.server.services.applications.updateSettings(
            applicationId: bench.server.applicationId, ApplicationSettingsUpdate { $0.maxDownloadsPerDevice = -1 })
        try await bench.engine.sync()
        #expect(try await bench.waitForOutcome("two").state == .completed)
        await bench.stop()
    }

    @Test func aDeviceTheBackplaneDoesNotLetDownloadWaitsUntilItMay() async throws {
        let server = try await InProcessBackplane.start(deviceLimit: 0)
        let bench = try await DownloadBench.start(server: server)
        bench.origin.serve("/one.mp4", TestOrigin.content(10_000))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "one", url: bench.origin.url("/one.mp4")))
        #expect(try await bench.engine.downloads.asset("one")?.state == .blocked(.deviceNotDownloadEnabled))
        try await Task.sleep(for: .milliseconds(200))
        #expect(bench.origin.requests("/one.mp4") == 0)

        let deviceId = try #require(await bench.engine.status.deviceId)
        _ = try await server.services.applications.updateSettings(applicationId: server.applicationId, ApplicationSettingsUpdate { $0.deviceLimit = 1 })
        _ = try await server.services.devices.setDownloadEnabled(
            applicationId: server.applicationId, deviceId: deviceId, enabled: true, origin: .admin)
        try await bench.engine.sync()
        #expect(try await bench.waitForOutcome("one").state == .completed)
        await bench.stop()
    }

    @Test func aRemoteWipeStopsTheDownloadDeletesEverythingAndIsAcknowledgedOnce() async throws {
        let bench = try await DownloadBench.start { $0.parallelFiles = 1; $0.adaptsConcurrency = false }
        _ = TestHLSAsset(serving: bench.origin, segments: 30)
        for index in 0..<30 { bench.origin.inject(.delay(.milliseconds(50)), at: "/hls/audio/en/\(index).aac") }
        // Counted as they arrive: an answer held by the origin's delay is counted when asked.
        let segments = { bench.origin.asked(under: "/hls/audio/en/").count }
        bench.origin.serve("/done.mp4", TestOrigin.content(10_000))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "done", url: bench.origin.url("/done.mp4")))
        #expect(try await bench.waitForOutcome("done").state == .completed)
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "show", url: bench.origin.url("/hls/master.m3u8"), kind: .hls, maxVideoBitrate: 0, audioLanguages: ["en"],
            subtitleLanguages: []))
        try await bench.wait("the download to start") { segments() >= 2 }

        let deviceId = try #require(await bench.engine.status.deviceId)
        let wipe = try await bench.server.enqueue(.wipe, device: deviceId)
        try await bench.engine.sync()
        try await bench.events.wait(for: "remoteWipe")
        try await Task.sleep(for: .milliseconds(100))
        let fetched = segments()
        #expect(fetched < 30)
        #expect(try await bench.engine.downloads.queue().isEmpty)
        #expect(try await bench.engine.downloads.completed().isEmpty)
        #expect(files(under: bench.dataDirectory.appendingPathComponent("content")).isEmpty)
        try await bench.server.waitForCommand(wipe.commandId, toBe: .succeeded)
        try await Task.sleep(for: .milliseconds(400))
        #expect(segments() == fetched, "nothing is fetched after the wipe")
        let outcomes = bench.events.all.filter { if case .remoteWipe = $0 { true } else { false } }
        #expect(outcomes.count == 1)
        await bench.stop()
    }
}

/// Subscriptions feed the download queue: no app code between publishing and the files.

/// A status the app reports to the engine (the network, the power), switched by a test.
final class SwitchableStatus<Status: Sendable>: Sendable {
    private let state: LockedBox<(status: Status, listeners: [AsyncStream<Status>.Continuation])>

    init(_ status: Status) {
        state = LockedBox((status, []))
    }

    var status: Status { state.withLock { $0.status } }

    func changes() -> AsyncStream<Status> {
        let (stream, continuation) = AsyncStream.makeStream(of: Status.self)
        state.withLock { $0.listeners.append(continuation) }
        return stream
    }

    func set(_ status: Status) {
        let listeners = state.withLock { state in
            state.status = status
            return state.listeners
        }
        for listener in listeners { listener.yield(status) }
    }
}

/// The network as the app reports it (in an app, e.g. from `NWPathMonitor`).
typealias SwitchableNetwork = SwitchableStatus<NetworkStatus>

extension SwitchableStatus: NetworkMonitor where Status == NetworkStatus {
    static var wifi: NetworkStatus { NetworkStatus(isAvailable: true, isExpensive: false) }
    static var cellular: NetworkStatus { NetworkStatus(isAvailable: true, isExpensive: true) }
    static var offline: NetworkStatus { NetworkStatus(isAvailable: false, isExpensive: false) }
}

/// The network rules: the engine reads the app's monitor before each file and follows its changes.
@Suite struct NetworkRuleTests {
    @Test func downloadsWaitForAllowedNetworkAndStopWhenItGoes() async throws {
        let network = SwitchableNetwork(SwitchableNetwork.cellular)
        let bench = try await DownloadBench.start { $0.network = network; $0.parallelFiles = 2 }
        let hls = TestHLSAsset(serving: bench.origin, segments: 40, segmentBytes: 30_000)
        for index in 0..<40 { bench.origin.inject(.delay(.milliseconds(30)), at: "/hls/audio/en/\(index).aac") }
        // Counted as they arrive: an answer held by the origin's delay is counted when asked.
        let segments = { bench.origin.asked(under: "/hls/audio/en/").count }
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "show", url: bench.origin.url("/hls/master.m3u8"), kind: .hls, maxVideoBitrate: 0, audioLanguages: ["en"],
            subtitleLanguages: []))

        // Cellular only, and the app did not allow it: blocked, no segment fetched.
        try await bench.wait("the queue to block on cellular") {
            try await bench.engine.downloads.status() == .blocked(.cellularNotAllowed)
        }
        #expect(try await bench.engine.downloads.asset("show")?.state == .blocked(.cellularNotAllowed))
        #expect(segments() == 0)

        // Wi-Fi: it starts. The network gone: the file under way stops too, and nothing more is asked.
        network.set(SwitchableNetwork.wifi)
        try await bench.wait("part of the download") {
            try await bench.engine.downloads.asset("show").map { $0.bytesDownloaded > 200_000 } ?? false
        }
        network.set(SwitchableNetwork.offline)
        try await bench.wait("the queue to block offline") {
            try await bench.engine.downloads.status() == .blocked(.networkUnavailable)
        }
        #expect(try await bench.engine.downloads.asset("show")?.state == .blocked(.networkUnavailable))
        let askedWhileOffline = segments()
        #expect(askedWhileOffline < 40, "the download finished before the network went")
        try await Task.sleep(for: .milliseconds(300))
        #expect(segments() == askedWhileOffline)

        // Back: it completes, every file as the origin has it (a loaded machine, the whole
        // suite on two cores, took a minute to get here once: the wait is long).
        network.set(SwitchableNetwork.wifi)
        let asset = try await bench.waitForOutcome("show", timeout: .seconds(120))
        #expect(asset.state == .completed)
        let index = try #require(asset.localURL)
        let tree = try LocalPlaylistTree(index: index)
        let audio = try #require(tree.references.first { $0.key.hasPrefix("audio") }?.value)
        #expect(audio.count == 40)
        for (number, path) in audio.enumerated() {
            let local = index.deletingLastPathComponent().appendingPathComponent(path)
            #expect(try Data(contentsOf: local) == hls.files["/hls/audio/en/\(number).aac"], "\(path)")
        }
        await bench.stop()
    }

    @Test func cellularIsUsedWhenTheAppAllowsIt() async throws {
        let network = SwitchableNetwork(SwitchableNetwork.cellular)
        let bench = try await DownloadBench.start { $0.network = network; $0.downloadOverCellular = true }
        bench.origin.serve("/one.mp4", TestOrigin.content(50_000))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "one", url: bench.origin.url("/one.mp4")))
        #expect(try await bench.waitForOutcome("one").state == .completed)
        await bench.stop()
    }
}
