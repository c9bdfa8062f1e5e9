import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Testing

@Suite struct RegistrationTests {
    @Test func newDeviceIsCreatedEnabledWithSettingsAndServerTime() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let before = Date().addingTimeInterval(-2)
            let (identity, body) = try await client.register(user: "alice", device: "phone-1", external: "ext-1")
            #expect(body.outcome == .created)
            #expect(body.alreadyRegistered == false)
            #expect(body.deviceLimitReached == false)
            #expect(body.device.downloadEnabled)
            #expect(body.device.userId == "alice")
            #expect(body.device.externalDeviceId == "ext-1")
            #expect(body.settings == .defaults)
            #expect(body.serverTime >= before)
            #expect(identity.credential.hasPrefix("dc_"))

            let own = try await client.device(.get, "/v1/devices/phone-1", as: identity)
            #expect(own.status == .ok)
            #expect(try own.decode(DeviceResponse.self).device.deviceId == "phone-1")
        }
    }

    @Test func reRegisteringTheSameDeviceReturnsItAndRotatesTheCredential() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (first, created) = try await client.register(user: "alice", device: "phone-1")
            _ = try await client.device(.put, "/v1/devices/phone-1/download-enabled", json: DownloadEnabledRequest(downloadEnabled: false), as: first)
            let (second, again) = try await client.register(user: "alice", device: "phone-1")
            #expect(again.outcome == .existing)
            #expect(again.alreadyRegistered)
            #expect(again.device.registeredAt == created.device.registeredAt)
            // Re-registration does not flip the download flag the device chose.
            #expect(again.device.downloadEnabled == false)
            #expect(second.credential != first.credential)

            let stale = try await client.device(.get, "/v1/devices/phone-1", as: first)
            #expect(stale.status == .unauthorized)
            #expect(stale.errorCode == .invalidCredentials)
            #expect(try await client.device(.get, "/v1/devices/phone-1", as: second).status == .ok)

            let list = try await client.admin(.get, "/v1/admin/devices?userId=alice").decode(DevicePage.self)
            #expect(list.devices.count == 1)
        }
    }

    @Test func deviceOfAnotherUserIsAConflictUnlessMoved() async throws {
        let fixture = try await Fixture.make(deviceLimit: 1)
        try await fixture.test { client in
            try await client.register(user: "alice", device: "tablet")
            let conflict = try await client.device(.post, "/v1/devices/register", json: RegisterDeviceRequest(
                userId: "bob", deviceId: "tablet", platform: "linux"))
            #expect(conflict.status == .conflict)
            #expect(conflict.errorCode == .deviceAlreadyRegistered)
            // Nothing changed: the tablet is still alice's.
            let stillAlice = try await client.admin(.get, "/v1/admin/devices/tablet").decode(DeviceResponse.self)
            #expect(stillAlice.device.userId == "alice")

            let (_, moved) = try await client.register(user: "bob", device: "tablet", move: true)
            #expect(moved.outcome == .moved)
            #expect(moved.device.userId == "bob")
            #expect(moved.device.downloadEnabled)

            // Alice's slot was freed: with a limit of 1 her next device is enabled.
            let (_, aliceNext) = try await client.register(user: "alice", device: "laptop")
            #expect(aliceNext.device.downloadEnabled)
            #expect(aliceNext.deviceLimitReached == false)
        }
    }

    @Test func devicesAboveTheLimitAreRegisteredDisabled() async throws {
        let fixture = try await Fixture.make(deviceLimit: 3)
        try await fixture.test { client in
            var identities: [DeviceIdentity] = []
            for index in 1...3 {
                let (identity, body) = try await client.register(user: "carol", device: "d\(index)")
                #expect(body.device.downloadEnabled)
                identities.append(identity)
            }
            let (fourth, body) = try await client.register(user: "carol", device: "d4")
            #expect(body.outcome == .created)
            #expect(body.device.downloadEnabled == false)
            #expect(body.deviceLimitReached)

            // Another user is not affected by carol's limit.
            #expect(try await client.register(user: "dave", device: "x1").1.device.downloadEnabled)

            let refused = try await client.device(.put, "/v1/devices/d4/download-enabled", json: DownloadEnabledRequest(downloadEnabled: true), as: fourth)
            #expect(refused.status == .conflict)
            #expect(refused.errorCode == .deviceLimitReached)
            #expect(refused.errorDetails?["downloadEnabledCount"] == .int(3))
            #expect(refused.errorDetails?["deviceLimit"] == .int(3))

            let disabled = try await client.device(.put, "/v1/devices/d1/download-enabled", json: DownloadEnabledRequest(downloadEnabled: false), as: identities[0])
            #expect(try disabled.decode(DeviceResponse.self).device.downloadEnabled == false)
            let enabled = try await client.device(.put, "/v1/devices/d4/download-enabled", json: DownloadEnabledRequest(downloadEnabled: true), as: fourth)
            #expect(enabled.status == .ok)
            #expect(try enabled.decode(DeviceResponse.self).device.downloadEnabled)

            let list = try await client.device(.get, "/v1/devices", as: fourth).decode(UserDevicesResponse.self)
            #expect(list.downloadEnabledCount == 3)
            #expect(list.devices.count == 4)
        }
    }

    @Test func unregisteredDeviceIsRefusedUntilItRegistersAgain() async throws {
        let fixture = try await Fixture.make(deviceLimit: 1)
        try await fixture.test { client in
            let (identity, _) = try await client.register(user: "erin", device: "old-phone")
            let gone = try await client.device(.post, "/v1/devices/old-phone/unregister", as: identity)
            #expect(gone.status == .ok)
            let device = try gone.decode(DeviceResponse.self).device
            #expect(device.unregisteredAt != nil)
            #expect(device.downloadEnabled == false)

            let refused = try await client.device(.get, "/v1/devices/old-phone", as: identity)
            #expect(refused.status == .forbidden)
            #expect(refused.errorCode == .deviceUnregistered)

            // The freed slot goes to the user's next device; the unregistered one is hidden from lists.
            let (newPhone, fresh) = try await client.register(user: "erin", device: "new-phone")
            #expect(fresh.device.downloadEnabled)
            let list = try await client.device(.get, "/v1/devices", as: newPhone).decode(UserDevicesResponse.self)
            #expect(list.devices.map(\.deviceId) == ["new-phone"])

            let (_, back) = try await client.register(user: "erin", device: "old-phone")
            #expect(back.outcome == .reactivated)
            #expect(back.device.unregisteredAt == nil)
            #expect(back.device.downloadEnabled == false)
            #expect(back.deviceLimitReached)
        }
    }
}
