import Backplane
import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// How the engine's background jobs (sync loop, uploader, channel) follow its state: everything
/// a start needs exists before the first sync, and every job stops when the engine stops running
/// and comes back with the next start.
@Suite struct EngineLifecycleTests {
    @Test func aKillWaitingAtStartUploadsWhatItLoggedBeforeTheDeviceLeaves() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let dataDir = temporaryDirectory("sdk-kill-at-start")
        let first = BackplaneEngine(configuration: server.configuration(user: "kim", dataDirectory: dataDir))
        for asset in ["a1", "a2"] {
            try await first.addDownloadedAsset(assetId: asset, copying: try makeContentFile(named: "\(asset).mp4"))
        }
        try await first.start()
        let deviceId = try #require(await first.status.deviceId)
        await first.shutdown()

        // Enqueued while the app is closed: the start's own sync brings it.
        let kill = try await server.enqueue(.kill, device: deviceId)
        let second = BackplaneEngine(configuration: server.configuration(user: "kim", dataDirectory: dataDir))
        let events = EventRecorder(second.events())
        try await second.start()
        try await events.wait(for: "remoteKill")
        #expect(await second.state == .unregistered)
        #expect(try await server.commandState(kill.commandId) == .succeeded)
        #expect(try await server.hasWipeLog(device: deviceId, assets: ["a1", "a2"]))
        await second.shutdown()
    }

    @Test func anEngineStoppedByARefusedKeyUploadsNothingUntilItStartsAgain() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let refusing = RefusingTransport()
        var configuration = server.configuration(user: "lou", dataDirectory: temporaryDirectory("sdk-idle"))
        configuration.transport = refusing
        configuration.eventLog.uploadThreshold = 1
        let engine = BackplaneEngine(configuration: configuration)
        let events = EventRecorder(engine.events())
        try await engine.start()
        try await events.wait(for: "logsSent")

        // The app key stops working: the background sync meets it and the engine goes idle.
        refusing.refuse(true)
        await engine.syncNow()
        try await events.wait(for: "invalidCredentials")
        let deadline = ContinuousClock.now + .seconds(30)
        while await engine.state != .idle, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(await engine.state == .idle)

        // Idle: what is logged stays queued, and nothing tries to send it.
        let attemptsWhenIdle = refusing.attempts
        for index in 1...3 { try engine.eventLogger.log(.custom(name: "while-idle", number: Double(index))) }
        try await Task.sleep(for: .milliseconds(500))
        #expect(refusing.attempts == attemptsWhenIdle, "an idle engine still sent requests")
        #expect(try engine.eventLogger.queuedCount() == 3)

        // The key works again and the app starts the engine: the uploader is back and sends them.
        refusing.refuse(false)
        try await engine.start()
        #expect(await engine.state == .running)
        try engine.eventLogger.log(.custom(name: "after-restart"))
        let sent = ContinuousClock.now + .seconds(10)
        while try engine.eventLogger.queuedCount() > 0, ContinuousClock.now < sent {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try engine.eventLogger.queuedCount() == 0)
        let stored = try await server.storedEvents(EventFilter(type: .custom)).compactMap(\.event.content.customName)
        #expect(stored.filter { $0 == "while-idle" }.count == 3)
        #expect(stored.contains("after-restart"))
        await engine.shutdown()
    }
}

/// Answers every request with `401 invalid_credentials` while told to, as a backplane does once
/// the app key is revoked; counts the requests it is handed either way.
final class RefusingTransport: Transport {
    let inner: any Transport = HTTPClientTransport()
    private let state = LockedBox((refusing: false, attempts: 0))

    var attempts: Int { state.withLock { $0.attempts } }

    func refuse(_ refusing: Bool) {
        state.withLock { $0.refusing = refusing }
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let refusing = state.withLock { state in
            state.attempts += 1
            return state.refusing
        }
        guard refusing else { return try await inner.send(request) }
        let body = try JSONEncoder().encode(ErrorBody(code: .invalidCredentials, message: "Unknown or revoked app key."))
        return TransportResponse(status: 401, body: body)
    }
}
