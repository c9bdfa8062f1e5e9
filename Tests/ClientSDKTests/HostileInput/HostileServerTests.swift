import ClientSDK
import Foundation
import BackplaneWire
import Testing
import Synchronization
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

/// Answers the first `refusals` syncs with a 429 that says `retryAfter`, then passes through.
final class RateLimitingTransport: Transport {
    private let inner = HTTPClientTransport()
    private let refusals = LockedBox(0)
    let retryAfter: Int
    private let sent = LockedBox<[Date]>([])
    var syncTimes: [Date] { sent.withLock { $0 } }

    init(refusals: Int, retryAfter: Int) {
        self.refusals.withLock { $0 = refusals }
        self.retryAfter = retryAfter
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        guard request.url.path == "/v1/sync" else { return try await inner.send(request) }
        sent.withLock { $0.append(Date()) }
        let refuse = refusals.withLock { left -> Bool in
            guard left > 0 else { return false }
            left -= 1
            return true
        }
        guard refuse else { return try await inner.send(request) }
        return TransportResponse(status: 429, body: Data("""
            {"error": {"code": "rate_limited", "message": "Too many requests from this device; retry in \(retryAfter) s.",
              "details": {"scope": "device", "retryAfterSeconds": \(retryAfter)}}}
            """.utf8))
    }
}

@Suite struct RateLimitedDeviceTests {
    @Test func aShortRetryAfterIsWaitedOutOnceAndALongOneIsTheCallers() async throws {
        let server = try await InProcessBackplane.start()
        for (retryAfter, succeeds) in [(1, true), (60, false)] {
            let transport = RateLimitingTransport(refusals: 1, retryAfter: retryAfter)
            var configuration = server.configuration(user: "rita", dataDirectory: temporaryDirectory("sdk-429"))
            configuration.transport = transport
            configuration.sync.useWakeUpChannel = false
            let engine = BackplaneEngine(configuration: configuration)
            if succeeds {
                try await engine.start()
                let times = transport.syncTimes
                #expect(times.count == 2)
                if times.count == 2 { #expect(times[1].timeIntervalSince(times[0]) >= 0.9) }
            } else {
                // Not waited out: the start goes on (its loop retries later) without a second sync now.
                try? await engine.start()
                #expect(transport.syncTimes.count == 1)
                _ = try await engine.sync()
                #expect(transport.syncTimes.count == 2)
            }
            await engine.shutdown()
        }
        await server.stop()
    }
}
