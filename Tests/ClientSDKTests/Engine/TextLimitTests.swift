import Backplane
import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// One unit for every text limit, on both sides: UTF-8 bytes. A user id the server registers is
/// one whose events it accepts; a longer one is refused at registration, with a clear 400.
@Suite struct TextLimitTests {
    @Test func aCJKUserIdThatRegistersHasItsEventsAccepted() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        // 42 CJK characters: 126 bytes, within the 128-byte limit.
        let user = String(repeating: "東", count: 42)
        let engine = BackplaneEngine(configuration: server.configuration(user: user, dataDirectory: temporaryDirectory("sdk-cjk-user")))
        try await engine.start()
        _ = try engine.eventLogger.log(.custom(name: "見た", string: String(repeating: "字", count: 600)))  // 1,800 bytes
        let events = EventRecorder(engine.events())
        #expect(try await engine.uploadEvents() > 0)
        #expect(events.count("logsRejected") == 0)
        let stored = try await server.storedEvents()
        #expect(stored.contains { $0.event.content.customName == "見た" && $0.event.userId == user })
        #expect(stored.allSatisfy { $0.event.userId == user })
        await engine.shutdown()
    }

    @Test func aCJKUserIdOverTheByteLimitIsRefusedAtRegistration() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        // 50 characters, 150 bytes: once registered, none of its events could be stored.
        let user = String(repeating: "東", count: 50)
        let engine = BackplaneEngine(configuration: server.configuration(user: user, dataDirectory: temporaryDirectory("sdk-cjk-long")))
        do {
            try await engine.start()
            Issue.record("a 150-byte user id registered")
        } catch let error as BackplaneClientError {
            #expect(error.status == 400)
            #expect(error.code == .validationFailed)
            #expect(error.details?["field"] == .string("userId"))
            #expect(error.message.contains("128 bytes"))
        }
        let all = try await server.services.devices.listDevices(
            applicationId: server.applicationId, filter: DeviceFilter(includeUnregistered: true), cursor: nil, limit: 500)
        #expect(all.devices.isEmpty)
        await engine.shutdown()
    }

    @Test func textIsShortenedToAByteLimitOnACharacterBoundary() {
        #expect("abc".prefix(utf8Bytes: 5) == "abc")
        #expect("東京都".prefix(utf8Bytes: 7) == "東京")  // 6 bytes; a third character would be 9
        #expect("e\u{301}x".prefix(utf8Bytes: 2) == "")  // é is one character of 3 bytes
        #expect(String(repeating: "字", count: 200).prefix(utf8Bytes: WireLimits.maxReasonLength).utf8.count == 498)
    }
}
