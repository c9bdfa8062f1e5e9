import Backplane
import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// A lost phone whose app is not connected: the wipe reaches it through a push, which the app
/// hands to the SDK. The backplane pushes through a local APNs endpoint that checks what Apple
/// checks; the test plays iOS, handing the payload APNs received to `handlePush`.
@Suite struct PushWakeUpTests {
    @Test func aWipeReachesADeviceWithoutAChannelThroughAPush() async throws {
        let rig = try await PushRig.start()
        defer { Task { await rig.stop() } }
        let server = try await InProcessBackplane.start(push: rig.options)
        defer { Task { await server.stop() } }
        _ = try await server.services.pushCredentials.setAPNs(applicationId: server.applicationId, rig.apnsCredentials)

        // No channel, and the interval sync an hour away: only the push can bring the wipe.
        let dataDir = temporaryDirectory("sdk-push")
        let engine = BackplaneEngine(configuration: server.configuration(user: "ann", dataDirectory: dataDir, channel: false))
        let events = EventRecorder(engine.events())
        try await engine.addDownloadedAsset(assetId: "a1", copying: try makeContentFile(named: "a1.mp4"))
        try await engine.start()
        let token = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"
        let device = try await engine.updatePushToken(token, provider: .apns)
        #expect(device.pushToken == token && device.pushProvider == .apns)

        let wipe = try await server.enqueue(.wipe, device: device.deviceId)
        #expect(await PushRig.eventually(within: 30) { rig.apns.pushes.count == 1 })
        let push = try #require(rig.apns.pushes.first)
        #expect(push.token == token)

        // What iOS hands the app delegate: the payload as `userInfo`.
        let userInfo = try #require(Self.userInfo(push.payload))
        #expect(!engine.handlePush(["aps": ["content-available": 1], "other": "app's own"]))
        #expect(engine.handlePush(userInfo))
        _ = try await events.wait(for: "remoteWipe", timeout: .seconds(30))
        #expect(try await engine.downloadedAssets().isEmpty)
        try await server.waitForCommand(wipe.commandId, toBe: .succeeded)

        // Clearing the token clears the provider, and the next command pushes nothing.
        let cleared = try await engine.updatePushToken(nil, provider: .apns)
        #expect(cleared.pushToken == nil && cleared.pushProvider == nil)
        await engine.shutdown()
    }

    /// JSON as `JSONSerialization` gives it, which is what `userInfo` holds.
    static func userInfo(_ payload: JSONValue) -> [AnyHashable: Any]? {
        guard let data = try? JSONEncoder().encode(payload) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [AnyHashable: Any]
    }
}
