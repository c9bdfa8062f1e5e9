import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Testing

/// Re-registering a device id takes its credential away from whoever held it, so only the install
/// that holds the device id may do it: the app key ships in every copy of the app, and a device's
/// siblings learn its id from `GET /v1/devices`.
@Suite struct DeviceProofTests {
    /// A registration as an install holding `key` (nil: an app-key-only request with no device key).
    private func register(
        _ client: Client, user: String, device: String, key: P256.Signing.PrivateKey?, sendKey: Bool = true, move: Bool? = nil,
        credential: String? = nil
    ) async throws -> TestResponse {
        let body = try Client.encode(RegisterDeviceRequest(
            userId: user, deviceId: device, platform: "linux", moveFromOtherUser: move,
            devicePublicKey: sendKey ? key.map(DeviceKeys.publicKey) : nil))
        var headers = client.fixture.signer.headers(method: .post, path: "/v1/devices/register", body: body, proofKey: key)
        if let credential { headers[HTTPField.Name(RequestSigning.Header.deviceCredential)!] = credential }
        return try await client.raw(.post, "/v1/devices/register", headers: headers, body: body)
    }

    private func expectTakeoverRefused(_ response: TestResponse, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(response.status == .conflict, "\(response.text)", sourceLocation: sourceLocation)
        #expect(response.errorCode == .deviceAlreadyRegistered, sourceLocation: sourceLocation)
        #expect(response.errorDetails?["proofRequired"] == .bool(true), sourceLocation: sourceLocation)
    }

    @Test func anotherInstallCannotTakeAKnownDeviceIdOver() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (phone, _) = try await client.register(user: "alice", device: "phone")
            let (sibling, _) = try await client.register(user: "alice", device: "tablet")
            // The sibling learns the phone's id from the user's device list...
            let ids = try await client.device(.get, "/v1/devices", as: sibling).decode(UserDevicesResponse.self).devices.map(\.deviceId)
            #expect(ids.contains("phone"))
            // ...and tries to register it from an install with another key, with no key, or by moving it.
            let thief = P256.Signing.PrivateKey()
            expectTakeoverRefused(try await register(client, user: "alice", device: "phone", key: thief))
            expectTakeoverRefused(try await register(client, user: "alice", device: "phone", key: nil))
            expectTakeoverRefused(try await register(client, user: "mallory", device: "phone", key: thief, move: true))
            // A proof by the real key, made for another request, does not carry over.
            let body = try Client.encode(RegisterDeviceRequest(userId: "alice", deviceId: "phone", platform: "linux"))
            let real = fixture.signer.headers(method: .post, path: "/v1/devices/register", body: body, proofKey: fixture.deviceKeys.key(for: "phone"))
            var replayed = fixture.signer.headers(method: .post, path: "/v1/devices/register", body: body)
            replayed[HTTPField.Name(RequestSigning.Header.deviceProof)!] = real[HTTPField.Name(RequestSigning.Header.deviceProof)!]
            expectTakeoverRefused(try await client.raw(.post, "/v1/devices/register", headers: replayed, body: body))

            // Nothing changed: the phone is still alice's and its credential still works.
            #expect(try await client.device(.get, "/v1/devices/phone", as: phone).status == .ok)
            #expect(try await client.admin(.get, "/v1/admin/devices/phone").decode(DeviceResponse.self).device.userId == "alice")
        }
    }

    @Test func theInstallHoldingTheKeyReRegistersAsItselfAndMayMove() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (first, created) = try await client.register(user: "alice", device: "phone")
            // A reinstall with the identity store intact: same id, same key, no credential.
            let again = try await register(client, user: "alice", device: "phone", key: fixture.deviceKeys.key(for: "phone"))
            #expect(again.status == .ok, "\(again.text)")
            let body = try again.decode(RegisterDeviceResponse.self)
            #expect(body.outcome == .existing)
            #expect(body.device.registeredAt == created.device.registeredAt)
            #expect(try await client.device(.get, "/v1/devices/phone", as: first).status == .unauthorized)
            // The key need not be sent again: the proof is what counts.
            let withoutKey = try await register(client, user: "alice", device: "phone", key: fixture.deviceKeys.key(for: "phone"), sendKey: false)
            #expect(withoutKey.status == .ok, "\(withoutKey.text)")
            let (_, moved) = try await client.register(user: "bob", device: "phone", move: true)
            #expect(moved.outcome == .moved)
        }
    }

    @Test func aKeyIsRecordedOnlyWithAProofByIt() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let key = P256.Signing.PrivateKey()
            // The key sent, but the proof made with another one, or missing.
            let body = try Client.encode(RegisterDeviceRequest(
                userId: "alice", deviceId: "phone", platform: "linux", devicePublicKey: DeviceKeys.publicKey(key)))
            for proofKey in [P256.Signing.PrivateKey(), nil] {
                let headers = fixture.signer.headers(method: .post, path: "/v1/devices/register", body: body, proofKey: proofKey)
                let response = try await client.raw(.post, "/v1/devices/register", headers: headers, body: body)
                #expect(response.status == .unauthorized, "\(response.text)")
                #expect(response.errorCode == .invalidSignature)
            }
            let garbage = try await client.device(.post, "/v1/devices/register", json: RegisterDeviceRequest(
                userId: "alice", deviceId: "phone", platform: "linux", devicePublicKey: "bm90IGEga2V5"), proofKey: key)
            #expect(garbage.status == .badRequest && garbage.errorCode == .validationFailed, "\(garbage.text)")
            #expect(try await client.admin(.get, "/v1/admin/devices?includeUnregistered=true").decode(DevicePage.self).devices.isEmpty)
        }
    }

    @Test func aDeviceRegisteredWithoutAKeyNeedsItsCredentialThenItsKey() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            // As registered by a client without a device key (or before keys existed).
            let legacy = try await register(client, user: "alice", device: "old", key: nil)
            #expect(legacy.status == .created, "\(legacy.text)")
            let credential = try legacy.decode(RegisterDeviceResponse.self).deviceCredential
            expectTakeoverRefused(try await register(client, user: "alice", device: "old", key: nil))
            expectTakeoverRefused(try await register(client, user: "alice", device: "old", key: P256.Signing.PrivateKey(), credential: "dc_wrong"))

            // Its current credential proves it, and the key it sends is recorded.
            let key = P256.Signing.PrivateKey()
            let enrolled = try await register(client, user: "alice", device: "old", key: key, credential: credential)
            #expect(enrolled.status == .ok, "\(enrolled.text)")
            let newCredential = try enrolled.decode(RegisterDeviceResponse.self).deviceCredential
            // From now on only the key proves it; the credential alone no longer does.
            expectTakeoverRefused(try await register(client, user: "alice", device: "old", key: nil, credential: newCredential))
            #expect(try await register(client, user: "alice", device: "old", key: key).status == .ok)
        }
    }

    @Test func anAdminReleaseLetsANewInstallClaimTheId() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (lost, _) = try await client.register(user: "alice", device: "lost-phone")
            let newKey = P256.Signing.PrivateKey()
            expectTakeoverRefused(try await register(client, user: "alice", device: "lost-phone", key: newKey))

            let released = try await client.admin(.post, "/v1/admin/devices/lost-phone/release")
            #expect(released.status == .ok, "\(released.text)")
            #expect(try released.decode(DeviceResponse.self).device.unregisteredAt != nil)
            #expect(try await client.device(.get, "/v1/devices/lost-phone", as: lost).status == .unauthorized)

            let claimed = try await register(client, user: "alice", device: "lost-phone", key: newKey)
            #expect(claimed.status == .ok, "\(claimed.text)")
            #expect(try claimed.decode(RegisterDeviceResponse.self).outcome == .reactivated)
            // The new install's key is the device's key now.
            expectTakeoverRefused(try await register(client, user: "alice", device: "lost-phone", key: fixture.deviceKeys.key(for: "lost-phone")))
            #expect(try await client.admin(.post, "/v1/admin/devices/nobody/release").status == .notFound)
        }
    }
}
