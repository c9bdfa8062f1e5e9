import Backplane
import ClientSDK
import Foundation
import JWTKit
import BackplaneWire
import Testing
import TestSupport

/// The engine and user tokens: the app's closure asked again after a refusal, a closure that
/// throws, and the events of a previous user kept when another user takes the device.
@Suite struct EngineUserTokenTests {
    static let secret = "the app backend's secret of more than thirty-two bytes"

    static func token(for user: String, issuedAt: Date = Date()) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: Data(secret.utf8)), digestAlgorithm: .sha256)
        return try await keys.sign(UserTokenClaims(user: user, issuer: "https://backend.example", audience: "app", issuedAt: issuedAt))
    }

    static func requireTokens(_ server: InProcessBackplane) async throws {
        _ = try await server.services.userIdentity.set(
            applicationId: server.applicationId,
            UserIdentityUpdate(required: true, issuer: "https://backend.example", audience: "app", hs256Secret: secret))
    }

    @Test func aRefusedTokenIsAskedForOnceMoreAndTheFreshOneRegisters() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        try await Self.requireTokens(server)
        let calls = LockedBox(0)
        var configuration = server.configuration(user: "alice", dataDirectory: temporaryDirectory("sdk-token-retry"))
        configuration.userToken = { user in
            let call = calls.withLock { $0 += 1; return $0 }
            // The first token expired on its way (issued an hour ago); the next is fresh.
            return try await Self.token(for: user, issuedAt: call == 1 ? Date().addingTimeInterval(-3600) : Date())
        }
        let engine = BackplaneEngine(configuration: configuration)
        try await engine.start()
        #expect(calls.withLock { $0 } == 2)
        #expect(try await server.devices(user: "alice").count == 1)
        await engine.shutdown()
    }

    @Test func aClosureThatThrowsFailsTheStartAndRegistersNothing() async throws {
        struct BackendDown: Error {}
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        try await Self.requireTokens(server)
        var configuration = server.configuration(user: "alice", dataDirectory: temporaryDirectory("sdk-token-throws"))
        configuration.userToken = { _ in throw BackendDown() }
        let engine = BackplaneEngine(configuration: configuration)
        let error = await #expect(throws: BackplaneClientError.self) { try await engine.start() }
        #expect(error?.kind == .userToken)
        #expect(error?.underlying is BackendDown)
        #expect(try await server.devices(user: "alice").isEmpty)
        await engine.shutdown()
    }

    /// The backplane takes a device's events for its own user only: what the previous user
    /// logged goes up, as that user, before the device moves.
    @Test func eventsQueuedByThePreviousUserGoUpBeforeTheDeviceMoves() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let dataDir = temporaryDirectory("sdk-user-change")
        let alice = BackplaneEngine(configuration: server.configuration(user: "alice", dataDirectory: dataDir))
        try await alice.start()
        await alice.shutdown()
        // Logged while the app is not running for alice any more (say, the last moments before sign-out).
        let aliceLogging = BackplaneEngine(configuration: server.configuration(user: "alice", dataDirectory: dataDir))
        for index in 1...3 { try aliceLogging.eventLogger.log(.custom(name: "before-move-\(index)")) }
        await aliceLogging.shutdown()

        var moving = server.configuration(user: "frank", dataDirectory: dataDir)
        moving.device.moveFromOtherUser = true
        let frank = BackplaneEngine(configuration: moving)
        let events = EventRecorder(frank.events())
        try await frank.start()
        try await events.wait(for: "registered")
        let stored = try await server.storedEvents(EventFilter(userId: "alice")).compactMap(\.event.content.customName)
        #expect(stored.filter { $0.hasPrefix("before-move-") }.sorted() == ["before-move-1", "before-move-2", "before-move-3"])
        _ = try await frank.uploadEvents()
        #expect(!events.names.contains("logsRejected"), "\(events.names)")
        #expect(try await server.devices(user: "frank").count == 1)
        await frank.shutdown()
    }
}
