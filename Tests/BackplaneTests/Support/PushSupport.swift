import Backplane
import Crypto
import Foundation
import JWTKit
import BackplaneWire
import Testing
import TestSupport

extension PushRig {
    /// Sets both providers' credentials of the fixture's application.
    func configure(_ client: Client) async throws {
        let apns = try await client.admin(.put, "/v1/admin/push/apns", json: apnsCredentials)
        #expect(apns.status == .ok, "\(apns.text)")
        let fcm = try await client.admin(.put, "/v1/admin/push/fcm", json: FCMCredentialsUpdate(serviceAccount: serviceAccount))
        #expect(fcm.status == .ok, "\(fcm.text)")
    }
}

extension Client {
    /// Registers a device with a push token of `provider`.
    @discardableResult
    func registerForPush(
        user: String = "alice", token: String, provider: PushProvider?, platform: String = "ios", at time: Date = Date()
    ) async throws -> DeviceIdentity {
        let device = UUID().uuidString
        let key = fixture.deviceKeys.key(for: device)
        let response = try await self.device(.post, "/v1/devices/register", json: RegisterDeviceRequest(
            userId: user, deviceId: device, platform: platform, pushToken: token, pushProvider: provider,
            devicePublicKey: DeviceKeys.publicKey(key)), at: time, proofKey: key)
        #expect(response.status == .created, "registration failed: \(response.text)")
        let body = try response.decode(RegisterDeviceResponse.self)
        return DeviceIdentity(deviceId: body.device.deviceId, credential: body.deviceCredential)
    }

    func wipe(_ device: DeviceIdentity) async throws {
        let response = try await admin(.post, "/v1/admin/commands", json: EnqueueCommandRequest(type: .wipe, deviceId: device.deviceId))
        #expect(response.status == .created, "\(response.text)")
    }

    func adminDevice(_ device: DeviceIdentity) async throws -> Device {
        try await admin(.get, "/v1/admin/devices/\(device.deviceId)").decode(DeviceResponse.self).device
    }
}
