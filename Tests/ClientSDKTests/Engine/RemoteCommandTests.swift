import Backplane
import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport

@Suite struct RemoteCommandTests {
    /// Starts an engine holding `assets` downloaded files.
    private func engine(
        _ server: InProcessBackplane, user: String, dataDir: URL = temporaryDirectory("sdk-cmd"), channel: Bool = false,
        assets: [String] = [], transport: (any Transport)? = nil
    ) async throws -> (BackplaneEngine, EventRecorder, URL) {
        var configuration = server.configuration(user: user, dataDirectory: dataDir, channel: channel)
        configuration.transport = transport
        let engine = BackplaneEngine(configuration: configuration)
        let events = EventRecorder(engine.events())
        for asset in assets {
            try await engine.addDownloadedAsset(assetId: asset, copying: try makeContentFile(named: "\(asset).mp4"))
        }
        try await engine.start()
        return (engine, events, dataDir)
    }

    private func contentFiles(_ dataDir: URL) -> [String] {
        let root = dataDir.appendingPathComponent("content")
        let enumerator = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey])
        return (enumerator?.allObjects as? [URL] ?? []).filter { !$0.hasDirectoryPath }.map(\.lastPathComponent).sorted()
    }

    @Test func aWipeArrivesThroughTheChannelAtOnce() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let (engine, events, dataDir) = try await engine(server, user: "ann", channel: true, assets: ["a1", "a2", "a3"])
        try await events.wait(for: "channelStateChanged") { if case .channelStateChanged(true) = $0 { true } else { false } }
        #expect(contentFiles(dataDir) == ["a1.mp4", "a2.mp4", "a3.mp4"])
        let deviceId = try #require(await engine.status.deviceId)

        // The interval sync is an hour away: only a wake-up through the channel can bring the
        // wipe. How fast it comes is a benchmark's question; here a loaded machine gets time.
        let wipe = try await server.enqueue(.wipe, device: deviceId)
        let event = try await events.wait(for: "remoteWipe", timeout: .seconds(30))
        if case .remoteWipe(let deleted) = event { #expect(deleted.sorted() == ["a1", "a2", "a3"]) }
        #expect(contentFiles(dataDir).isEmpty)
        #expect(try await engine.downloadedAssets().isEmpty)
        try await server.waitForCommand(wipe.commandId, toBe: .succeeded)
        #expect(server.services.wakeUpHub.channelCount == 1)
        await engine.shutdown()
        // The server lets go of a channel once the device closes it.
        let deadline = ContinuousClock.now + .seconds(30)
        while server.services.wakeUpHub.channelCount > 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(server.services.wakeUpHub.channelCount == 0)
    }

    @Test func anOfflineDeviceExecutesACommandExactlyOnceWhenItComesBack() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let dataDir = temporaryDirectory("sdk-offline")
        let (first, _, _) = try await engine(server, user: "ben", dataDir: dataDir, assets: ["keep", "drop"])
        let deviceId = try #require(await first.status.deviceId)
        await first.shutdown()

        // Enqueued while the app is not running.
        let command = try await server.enqueue(.deleteAssets, device: deviceId, assetIds: ["drop", "never-downloaded"])
        let (second, events, _) = try await engine(server, user: "ben", dataDir: dataDir)
        let deleted = try await events.wait(for: "assetsDeleted")
        if case .assetsDeleted(let ids, let reason) = deleted {
            #expect(ids == ["drop"])
            #expect(reason == .remote)
        }
        #expect(contentFiles(dataDir) == ["keep.mp4"])
        try await server.waitForCommand(command.commandId, toBe: .succeeded)
        // The same asset id downloaded again afterwards must survive later syncs and restarts.
        try await second.addDownloadedAsset(assetId: "drop", copying: try makeContentFile(named: "drop.mp4"))
        try await second.sync()
        await second.shutdown()

        let (third, thirdEvents, _) = try await engine(server, user: "ben", dataDir: dataDir)
        try await third.sync()
        #expect(!thirdEvents.names.contains("assetsDeleted"))
        #expect(contentFiles(dataDir) == ["drop.mp4", "keep.mp4"])
        await third.shutdown()
    }

    @Test func anAcknowledgementLostInTransitIsSentAgainAfterARestart() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let dataDir = temporaryDirectory("sdk-lost-ack")
        let (setup, _, _) = try await engine(server, user: "cat", dataDir: dataDir, assets: ["a1"])
        let deviceId = try #require(await setup.status.deviceId)
        await setup.shutdown()
        let wipe = try await server.enqueue(.wipe, device: deviceId)

        // Every sync that carries an ack is lost on the way.
        let dropAcks = DroppingTransport { String(decoding: $0.body, as: UTF8.self).contains("\"acks\"") }
        let (flaky, flakyEvents, _) = try await engine(server, user: "cat", dataDir: dataDir, transport: dropAcks)
        try await flakyEvents.wait(for: "remoteWipe")
        #expect(contentFiles(dataDir).isEmpty)
        #expect(try await server.commandState(wipe.commandId) == .delivered)
        await flaky.shutdown()

        // The app restarts with a working network: the stored outcome is acknowledged, not re-run.
        let (healthy, healthyEvents, _) = try await engine(server, user: "cat", dataDir: dataDir)
        try await server.waitForCommand(wipe.commandId, toBe: .succeeded)
        #expect(!healthyEvents.names.contains("remoteWipe"))
        await healthy.shutdown()
    }

    @Test func aKillWipesUnregistersAndForgetsTheCredential() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let (engine, events, dataDir) = try await engine(server, user: "dee", assets: ["a1", "a2"])
        let deviceId = try #require(await engine.status.deviceId)
        let kill = try await server.enqueue(.kill, device: deviceId)
        await engine.syncNow()
        try await events.wait(for: "remoteKill")
        let names = events.names.filter { ["startingRemoteKill", "remoteWipe", "unregistered", "remoteKill"].contains($0) }
        #expect(names == ["startingRemoteKill", "remoteWipe", "unregistered", "remoteKill"])
        #expect(contentFiles(dataDir).isEmpty)
        #expect(await engine.state == .unregistered)
        #expect(await engine.status.isRegistered == false)
        #expect(try await server.commandState(kill.commandId) == .succeeded)
        #expect(try await server.devices(user: "dee").first?.unregisteredAt != nil)
        // What the kill logged reached the backplane before the device was taken out.
        #expect(try await server.hasWipeLog(device: deviceId, assets: ["a1", "a2"]))
        await engine.shutdown()
    }

    @Test func anUnregisterCommandStopsTheEngine() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let (engine, events, dataDir) = try await engine(server, user: "eli", channel: true, assets: ["a1"])
        try await events.wait(for: "channelStateChanged")
        let deviceId = try #require(await engine.status.deviceId)
        let command = try await server.enqueue(.unregister, device: deviceId)
        try await events.wait(for: "unregistered")
        #expect(try await server.commandState(command.commandId) == .succeeded)
        #expect(try await server.devices(user: "eli").first?.unregisteredAt != nil)
        // Unregistering keeps the downloads; only wipe and kill delete them.
        #expect(contentFiles(dataDir) == ["a1.mp4"])
        #expect(await engine.state == .unregistered)
        await engine.shutdown()
    }

    @Test func theChannelWakesTheDeviceForAdminChanges() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let (engine, events, _) = try await engine(server, user: "fay", channel: true)
        try await events.wait(for: "channelStateChanged")
        let deviceId = try #require(await engine.status.deviceId)
        _ = try await server.services.devices.setDownloadEnabled(
            applicationId: server.applicationId, deviceId: deviceId, enabled: false, origin: .admin)
        try await events.wait(for: "downloadEnabledChanged", timeout: .seconds(30))
        _ = try await server.services.applications.updateSettings(
            applicationId: server.applicationId, ApplicationSettingsUpdate { $0.maxDownloadsPerDevice = 7 })
        try await events.wait(for: "settingsChanged", timeout: .seconds(30))
        await engine.shutdown()
    }

    @Test func theChannelReconnectsAfterTheServerComesBack() async throws {
        let server = try await InProcessBackplane.start()
        let (engine, events, _) = try await engine(server, user: "gus", channel: true, assets: ["a1"])
        try await events.wait(for: "channelStateChanged") { if case .channelStateChanged(true) = $0 { true } else { false } }
        await server.stop()
        try await events.wait(for: "channelStateChanged") { if case .channelStateChanged(false) = $0 { true } else { false } }

        let restarted = try await server.restart()
        defer { Task { await restarted.stop() } }
        let deadline = ContinuousClock.now + .seconds(10)
        while await !engine.isChannelConnected, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(await engine.isChannelConnected)
        let deviceId = try #require(await engine.status.deviceId)
        _ = try await restarted.services.commands.enqueue(
            applicationId: restarted.applicationId, EnqueueCommandRequest(type: .wipe, deviceId: deviceId))
        try await events.wait(for: "remoteWipe", timeout: .seconds(30))
        await engine.shutdown()
    }
}
