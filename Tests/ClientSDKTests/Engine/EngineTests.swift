import Backplane
import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport

@Suite struct EngineTests {
    @Test func startRegistersOnceAndARestartedEngineResumesAsTheSameDevice() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let dataDir = temporaryDirectory("sdk-device")
        defer { try? FileManager.default.removeItem(at: dataDir) }

        let first = BackplaneEngine(configuration: server.configuration(user: "alice", dataDirectory: dataDir))
        let firstEvents = EventRecorder(first.events())
        try await first.start()
        let status = await first.status
        #expect(status.isRegistered)
        #expect(status.device?.downloadEnabled == true)
        #expect(status.settings == .defaults)
        await first.shutdown()
        // The queued install and launch events go up once, after the sync (or at shutdown).
        #expect(firstEvents.names == ["registered", "syncCompleted", "logsSent"])
        let deviceId = try #require(status.deviceId)

        // The app restarts: same data directory, new engine.
        let second = BackplaneEngine(configuration: server.configuration(user: "alice", dataDirectory: dataDir))
        let secondEvents = EventRecorder(second.events())
        try await second.start()
        #expect(await second.status.deviceId == deviceId)
        await second.shutdown()
        #expect(secondEvents.names == ["syncCompleted", "logsSent"], "a restarted engine registered again")
        #expect(try await server.devices(user: "alice").map(\.deviceId) == [deviceId])
    }

    @Test func deviceLimitIsReportedAndEnablingFollowsIt() async throws {
        let server = try await InProcessBackplane.start(deviceLimit: 1)
        defer { Task { await server.stop() } }
        let phone = BackplaneEngine(configuration: server.configuration(user: "bob", dataDirectory: temporaryDirectory("sdk-phone")))
        let tablet = BackplaneEngine(configuration: server.configuration(user: "bob", dataDirectory: temporaryDirectory("sdk-tablet")))
        let phoneEvents = EventRecorder(phone.events())
        let tabletEvents = EventRecorder(tablet.events())
        try await phone.start()
        try await tablet.start()
        #expect(await tablet.status.device?.downloadEnabled == false)
        try await tabletEvents.wait(for: "deviceLimitReached") {
            if case .deviceLimitReached(let limit, _) = $0 { return limit == 1 }
            return false
        }

        let refused = await #expect(throws: BackplaneClientError.self) { try await tablet.updateDownloadEnabled(true) }
        #expect(refused?.code == .deviceLimitReached)
        #expect(refused?.status == 409)
        #expect(refused?.details?["deviceLimit"] == .int(1))
        // The refusal is an event too, this time with the server's count.
        try await tabletEvents.wait(for: "deviceLimitReached") {
            if case .deviceLimitReached(1, let count) = $0 { return count == 1 }
            return false
        }

        let phoneDevice = try await phone.updateDownloadEnabled(false)
        #expect(phoneDevice.downloadEnabled == false)
        try await phoneEvents.wait(for: "downloadEnabledChanged")
        let tabletDevice = try await tablet.updateDownloadEnabled(true)
        #expect(tabletDevice.downloadEnabled)
        try await tabletEvents.wait(for: "downloadEnabledChanged") {
            if case .downloadEnabledChanged(let enabled) = $0 { return enabled }
            return false
        }

        let list = try await tablet.userDevices()
        #expect(list.devices.count == 2)
        #expect(list.downloadEnabledCount == 1)
        await phone.shutdown()
        await tablet.shutdown()
    }

    @Test func adminChangesArriveOnSyncNow() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let engine = BackplaneEngine(configuration: server.configuration(user: "carol", dataDirectory: temporaryDirectory("sdk-carol")))
        let events = EventRecorder(engine.events())
        try await engine.start()
        let deviceId = try #require(await engine.status.deviceId)

        _ = try await server.services.devices.setDownloadEnabled(
            applicationId: server.applicationId, deviceId: deviceId, enabled: false, origin: .admin)
        _ = try await server.services.applications.updateSettings(
            applicationId: server.applicationId, ApplicationSettingsUpdate { $0.expiryAfterPlaySeconds = 3600 })
        // The sync interval is an hour: only syncNow() can bring these in.
        await engine.syncNow()
        try await events.wait(for: "downloadEnabledChanged")
        let changed = try await events.wait(for: "settingsChanged")
        if case .settingsChanged(let settings) = changed { #expect(settings.expiryAfterPlaySeconds == 3600) }
        #expect(await engine.status.device?.downloadEnabled == false)
        await engine.shutdown()
    }

    @Test func profileUpdatesReachTheBackplane() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let engine = BackplaneEngine(configuration: server.configuration(user: "dan", dataDirectory: temporaryDirectory("sdk-dan")))
        try await engine.start()
        try await engine.setNickname("Dan's phone")
        try await engine.setExternalDeviceId("crm-7")
        try await engine.setPushToken("push-123")
        let stored = try #require(try await server.devices(user: "dan").first)
        #expect(stored.nickname == "Dan's phone")
        #expect(stored.externalDeviceId == "crm-7")
        #expect(stored.pushToken == "push-123")
        try await engine.setNickname(nil)
        #expect(try await server.devices(user: "dan").first?.nickname == nil)
        await engine.shutdown()
    }

    @Test func wrongSecretIsInvalidCredentials() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let engine = BackplaneEngine(configuration: server.configuration(user: "eve", dataDirectory: temporaryDirectory("sdk-eve"), secret: "wrong"))
        let events = EventRecorder(engine.events())
        let error = await #expect(throws: BackplaneClientError.self) { try await engine.start() }
        #expect(error?.isInvalidCredentials == true)
        try await events.wait(for: "invalidCredentials")
        #expect(await engine.state == .idle)
        #expect(try await server.devices(user: "eve").isEmpty)
        await engine.shutdown()
    }

    @Test func deviceOfAnotherUserIsReportedUnlessMoved() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let dataDir = temporaryDirectory("sdk-shared")
        let alice = BackplaneEngine(configuration: server.configuration(user: "alice", dataDirectory: dataDir))
        try await alice.start()
        await alice.shutdown()

        // Another person signs in on the same install.
        let frank = BackplaneEngine(configuration: server.configuration(user: "frank", dataDirectory: dataDir))
        let events = EventRecorder(frank.events())
        let error = await #expect(throws: BackplaneClientError.self) { try await frank.start() }
        #expect(error?.code == .deviceAlreadyRegistered)
        try await events.wait(for: "deviceAlreadyRegistered")
        await frank.shutdown()

        var moving = server.configuration(user: "frank", dataDirectory: dataDir)
        moving.device.moveFromOtherUser = true
        let moved = BackplaneEngine(configuration: moving)
        let movedEvents = EventRecorder(moved.events())
        try await moved.start()
        try await movedEvents.wait(for: "registered") {
            if case .registered(_, let outcome) = $0 { return outcome == .moved }
            return false
        }
        #expect(try await server.devices(user: "frank").count == 1)
        #expect(try await server.devices(user: "alice").isEmpty)
        await moved.shutdown()
    }

    @Test func unreachableBackplaneIsReportedAndTheLoopRecovers() async throws {
        // A port that refuses connections, held until the backplane takes it: a port merely
        // free could be another test's server by the time the engine calls it (CI saw a 404).
        let server = try await InProcessBackplane.start()
        await server.stop()
        let refusing = try RefusingPort()
        var configuration = server.configuration(user: "gina", dataDirectory: temporaryDirectory("sdk-gina"))
        configuration.backplaneURL = URL(string: "http://127.0.0.1:\(refusing.port)")!

        let engine = BackplaneEngine(configuration: configuration)
        let events = EventRecorder(engine.events())
        try await engine.start()  // does not throw: an app starts offline
        try await events.wait(for: "communicationsFailure")
        #expect(await engine.status.isRegistered == false)
        #expect(await engine.status.lastError?.kind == .communicationsFailure)

        // The backplane comes up on that port: the backoff loop registers and syncs on its own.
        refusing.close()
        let restarted = try await server.restart(port: refusing.port)
        defer { Task { await restarted.stop() } }
        try await events.wait(for: "syncCompleted")
        #expect(await engine.status.isRegistered)
        #expect(await engine.status.lastError == nil)
        #expect(try await restarted.devices(user: "gina").count == 1)
        await engine.shutdown()
    }

    @Test func syncsNeverOverlap() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let transport = CountingTransport(path: "/v1/sync")
        var configuration = server.configuration(user: "hal", dataDirectory: temporaryDirectory("sdk-hal"))
        configuration.transport = transport
        let engine = BackplaneEngine(configuration: configuration)
        try await engine.start()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<20 {
                group.addTask { _ = try await engine.sync() }
                group.addTask { await engine.syncNow() }
            }
            try await group.waitForAll()
        }
        #expect(transport.total >= 2)
        #expect(transport.maximumConcurrent == 1)
        await engine.shutdown()
    }

    @Test func unregisterStopsTheEngineAndTheNextStartRegistersAgain() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let dataDir = temporaryDirectory("sdk-ivy")
        let engine = BackplaneEngine(configuration: server.configuration(user: "ivy", dataDirectory: dataDir))
        let events = EventRecorder(engine.events())
        try await engine.start()
        try await engine.unregister()
        try await events.wait(for: "unregistered")
        #expect(await engine.state == .unregistered)
        let error = await #expect(throws: BackplaneClientError.self) { try await engine.sync() }
        #expect(error?.kind == .notRunning)
        #expect(try await server.devices(user: "ivy").first?.unregisteredAt != nil)
        await engine.shutdown()

        let again = BackplaneEngine(configuration: server.configuration(user: "ivy", dataDirectory: dataDir))
        let againEvents = EventRecorder(again.events())
        try await again.start()
        try await againEvents.wait(for: "registered") {
            if case .registered(_, let outcome) = $0 { return outcome == .reactivated }
            return false
        }
        await again.shutdown()
    }

    @Test func anAdminUnregisterIsNoticedAtTheNextSync() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let engine = BackplaneEngine(configuration: server.configuration(user: "jay", dataDirectory: temporaryDirectory("sdk-jay")))
        let events = EventRecorder(engine.events())
        try await engine.start()
        let deviceId = try #require(await engine.status.deviceId)
        _ = try await server.services.devices.unregister(applicationId: server.applicationId, deviceId: deviceId, origin: .admin)
        await engine.syncNow()
        try await events.wait(for: "unregistered")
        #expect(await engine.state == .unregistered)
        await engine.shutdown()
    }

    @Test func aRefusedCredentialIsRecoveredByRegisteringAgain() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let original = temporaryDirectory("sdk-kim-a")
        let engine = BackplaneEngine(configuration: server.configuration(user: "kim", dataDirectory: original))
        try await engine.start()
        let deviceId = try #require(await engine.status.deviceId)

        // A reinstall that kept its identity (id and device key, e.g. in the Keychain) registers
        // again, which rotates the credential the first install holds.
        let reinstall = temporaryDirectory("sdk-kim-b")
        let kept = FileDeviceIdentityStore(directory: original)
        try FileDeviceIdentityStore(directory: reinstall).saveDeviceKey(try #require(try kept.loadDeviceKey()))
        try FileDeviceIdentityStore(directory: reinstall).saveDeviceId(deviceId)
        let other = BackplaneEngine(configuration: server.configuration(user: "kim", dataDirectory: reinstall))
        try await other.start()
        await other.shutdown()

        let result = try await engine.sync()
        #expect(result.device.deviceId == deviceId)
        #expect(try await server.devices(user: "kim").count == 1)
        await engine.shutdown()
    }

    /// A backplane started again a moment ago refuses timestamps from before its restart (it
    /// spent nonces in memory) and names the first it accepts: the engine signs again with that.
    @Test func aSyncRightAfterTheBackplaneRestartsSignsAgainAndIsAnswered() async throws {
        let server = try await InProcessBackplane.start()
        let engine = BackplaneEngine(configuration: server.configuration(user: "ned", dataDirectory: temporaryDirectory("sdk-ned")))
        try await engine.start()
        let deviceId = try #require(await engine.status.deviceId)
        _ = try await engine.sync()
        await server.stop()
        let restarted = try await server.restart()
        defer { Task { await restarted.stop() } }
        // `stop()` cancels the server as a crash would: the client's pooled keep-alive connection
        // to it may close under the first request, which the SDK then signs again and sends once
        // more (`ClosedConnectionTests`). (The refusal of a replay from before the restart is
        // `SigningTests`'.)
        let result = try await engine.sync()
        #expect(result.device.deviceId == deviceId)
        await engine.shutdown()
    }

    @Test func aReinstallWithItsIdentityStoreRegistersAsItselfAndAnotherInstallCannot() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        // The identity store outlives the app's data (as the Keychain outlives a reinstall).
        let identity = FileDeviceIdentityStore(directory: temporaryDirectory("sdk-keychain"))
        var configuration = server.configuration(user: "kit", dataDirectory: temporaryDirectory("sdk-kit-a"))
        configuration.identityStore = identity
        let first = BackplaneEngine(configuration: configuration)
        try await first.start()
        let deviceId = try #require(await first.status.deviceId)
        await first.shutdown()

        configuration.dataDirectory = temporaryDirectory("sdk-kit-reinstalled")
        let reinstalled = BackplaneEngine(configuration: configuration)
        let events = EventRecorder(reinstalled.events())
        try await reinstalled.start()
        #expect(await reinstalled.status.deviceId == deviceId)
        try await events.wait(for: "registered", where: { if case .registered(_, outcome: .existing) = $0 { true } else { false } })
        #expect(try await server.devices(user: "kit").count == 1)

        // Another install that learnt the id (a sibling sees it in the user's device list) but
        // has its own key is refused, and the real device keeps working.
        let impostor = temporaryDirectory("sdk-kit-impostor")
        try FileDeviceIdentityStore(directory: impostor).saveDeviceId(deviceId)
        let other = BackplaneEngine(configuration: server.configuration(user: "kit", dataDirectory: impostor))
        let refused = await #expect(throws: BackplaneClientError.self) { try await other.start() }
        #expect(refused?.code == .deviceAlreadyRegistered)
        await other.shutdown()
        #expect(try await reinstalled.sync().device.deviceId == deviceId)
        await reinstalled.shutdown()
    }

    @Test func everySubscriberGetsEveryEventAndStreamsEndAtShutdown() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let engine = BackplaneEngine(configuration: server.configuration(user: "lee", dataDirectory: temporaryDirectory("sdk-lee")))
        let one = engine.events()
        let two = engine.events()
        try await engine.start()
        await engine.shutdown()
        var first: [String] = []
        for await event in one { first.append(event.name) }
        var second: [String] = []
        for await event in two { second.append(event.name) }
        #expect(first == ["registered", "syncCompleted", "logsSent"])
        #expect(second == first)
        let error = await #expect(throws: BackplaneClientError.self) { try await engine.start() }
        #expect(error?.kind == .notRunning)
    }

    @Test func serverClockTracksTheBackplane() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let engine = BackplaneEngine(configuration: server.configuration(user: "max", dataDirectory: temporaryDirectory("sdk-max")))
        let started = ContinuousClock.now
        try await engine.start()
        let result = try await engine.sync()
        // Same machine: the estimate is off by at most the one-second resolution of server time
        // plus half the round trip of the answer it was taken from. That may be any request since
        // the start (an event upload runs beside the sync), so the bound is all the time since.
        let elapsed = (ContinuousClock.now - started) / .seconds(1)
        #expect(abs(result.clockOffset) <= 1.0 + elapsed)
        #expect(abs(engine.serverNow.timeIntervalSinceNow) <= 1.0 + elapsed)
        await engine.shutdown()
    }
}

@Suite struct RetryPolicyTests {
    @Test func delaysGrowExponentiallyUpToTheMaximum() {
        let policy = RetryPolicy(initial: .seconds(1), maximum: .seconds(10), multiplier: 2, jitter: 0.5)
        #expect(policy.delay(afterFailures: 1, random: 0) == .seconds(1))
        #expect(policy.delay(afterFailures: 2, random: 0) == .seconds(2))
        #expect(policy.delay(afterFailures: 4, random: 0) == .seconds(8))
        #expect(policy.delay(afterFailures: 5, random: 0) == .seconds(10))
        #expect(policy.delay(afterFailures: 50, random: 0) == .seconds(10))
    }

    @Test func jitterTakesOffUpToItsFraction() {
        let policy = RetryPolicy(initial: .seconds(4), maximum: .seconds(60), multiplier: 2, jitter: 0.5)
        #expect(policy.delay(afterFailures: 1, random: 0.999) > .milliseconds(1990))
        #expect(policy.delay(afterFailures: 1, random: 0.5) == .seconds(3))
        let spread = Set((0..<50).map { _ in policy.delay(afterFailures: 3) })
        #expect(spread.count > 1, "jitter should spread retries")
        #expect(spread.allSatisfy { $0 >= .seconds(8) && $0 <= .seconds(16) })
    }
}
