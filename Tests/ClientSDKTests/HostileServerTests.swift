import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// A transport that answers every request with the same hostile bytes: what a broken proxy or a
/// tampered connection could send the SDK.
struct ScriptedTransport: Transport {
    let status: Int
    let body: String

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        TransportResponse(status: status, body: Data(body.utf8))
    }
}

@Suite struct HostileServerTests {
    private func engine(_ transport: ScriptedTransport) -> BackplaneEngine {
        BackplaneEngine(configuration: BackplaneClientConfiguration(
            backplaneURL: URL(string: "http://127.0.0.1:9")!, appKeyId: "ak", appKeySecret: "secret", userId: "u",
            dataDirectory: temporaryDirectory("sdk-hostile"), sync: SyncOptions(interval: .seconds(3600), useWakeUpChannel: false),
            transport: transport))
    }

    @Test func absurdServerTimesDoNotMoveTheClockOrCrashSigning() async throws {
        for serverTime in ["9223372036854775807", "-9223372036854775808", "1e300"] {
            // The stale-timestamp answer teaches the clock; the retry signs with it.
            let engine = engine(ScriptedTransport(status: 401, body: """
                {"error": {"code": "stale_timestamp", "message": "x", "details": {"serverTime": \(serverTime)}}}
                """))
            await #expect(throws: BackplaneClientError.self) { try await engine.start() }
            #expect(abs(engine.serverNow.timeIntervalSinceNow) < 5, "serverTime \(serverTime)")
            await engine.shutdown()
        }
        // A registration answer from year 9999 is not taken as the server's time either.
        let far = engine(ScriptedTransport(status: 201, body: """
            {"device": {"deviceId": "d", "userId": "u", "platform": "linux", "downloadEnabled": true,
              "registeredAt": "9999-12-31T00:00:00Z", "updatedAt": "9999-12-31T00:00:00Z", "lastSeenAt": "9999-12-31T00:00:00Z"},
             "outcome": "created", "alreadyRegistered": false, "deviceLimitReached": false, "deviceCredential": "dc_x",
             "settings": {"deviceLimit": 5, "expiryAfterDownloadSeconds": -1, "expiryAfterPlaySeconds": -1,
               "offlineViewingPeriodSeconds": -1, "maxDownloadsPerDevice": 100, "maxDownloadsPerAccount": -1,
               "maxLifetimeDownloadsPerAsset": -1, "maxCopiesPerAccount": -1},
             "serverTime": "9999-12-31T00:00:00Z"}
            """))
        _ = try? await far.start()
        #expect(abs(far.serverNow.timeIntervalSinceNow) < 5)
        await far.shutdown()
    }
}
