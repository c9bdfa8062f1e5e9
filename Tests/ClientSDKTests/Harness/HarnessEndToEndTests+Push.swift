import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// Push wake-ups through the built server (pointed at local APNs and Google endpoints by its
/// operator flags) and the built harness: part of the serialized end-to-end suite.
extension HarnessEndToEndTests {
    @Test func aDeviceRegisteredWithAPushTokenIsPushedForItsWipe() async throws {
        let root = temporaryDirectory("backplane-harness-push")
        defer { try? FileManager.default.removeItem(at: root) }
        let rig = try await PushRig.start()
        defer { Task { await rig.stop() } }
        let backplane = try await ServedBackplane(root: root, arguments: [
            "--apns-url", rig.apns.server.url.absoluteString, "--fcm-url", rig.google.server.url.absoluteString,
            "--google-token-url", rig.google.tokenURL.absoluteString, "--push-ca-file", rig.certificates.authority.path,
        ])
        defer { backplane.process.terminate() }
        try await backplane.admin("PUT", "/v1/admin/push/fcm", body: String(decoding: try JSONEncoder().encode(
            FCMCredentialsUpdate(serviceAccount: rig.serviceAccount)), as: UTF8.self))
        let harness = try backplane.harness(user: "ann")

        let refused = try await harness.run(["register", "--push-token", "fcm-harness"], device: "pixel")
        #expect(refused.status != 0, "--push-token without --push-provider")
        let registered = try await harness.run(["register", "--push-token", "fcm-harness", "--push-provider", "fcm"], device: "pixel")
        #expect(registered.status == 0, "\(registered.json)")
        guard case .object(let status) = registered.json["status"], case .string(let deviceId) = status["deviceId"] else {
            Issue.record("no device id in \(registered.json)")
            return
        }
        let shown = try WireJSON.decoder().decode(DeviceResponse.self, from: try await backplane.admin("GET", "/v1/admin/devices/\(deviceId)"))
        #expect(shown.device.pushToken == "fcm-harness" && shown.device.pushProvider == .fcm)

        // The harness is not running: the wipe goes out as a push, and the device syncs when it comes.
        try await backplane.admin("POST", "/v1/admin/commands", body: #"{"type": "wipe", "deviceId": "\#(deviceId)"}"#)
        #expect(await PushRig.eventually(within: 30) { rig.google.messages.count == 1 })
        #expect(rig.google.messages.first?.token == "fcm-harness")
        #expect(rig.google.messages.first?.data == [PushWakeUpPayload.key: PushWakeUpPayload.value])
        let sync = try await harness.run(["sync"], device: "pixel")
        #expect(Self.events(sync.json).contains("remoteWipe"), "\(sync.json)")
    }
}
