import Backplane
import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Testing

@Suite struct DeviceRoutesTests {
    @Test func profileUpdatesSetAndClearFields() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice", device: "phone")
            let set = try await client.device(.patch, "/v1/devices/phone", json: DeviceProfileUpdate(
                nickname: "Kitchen iPad", externalDeviceId: "crm-42", pushToken: "push-abc"), as: me)
            #expect(set.status == .ok)
            let device = try set.decode(DeviceResponse.self).device
            #expect(device.nickname == "Kitchen iPad")
            #expect(device.externalDeviceId == "crm-42")
            #expect(device.pushToken == "push-abc")

            // Absent fields stay, an empty string clears.
            let cleared = try await client.device(.patch, "/v1/devices/phone", json: DeviceProfileUpdate(nickname: ""), as: me)
            let after = try cleared.decode(DeviceResponse.self).device
            #expect(after.nickname == nil)
            #expect(after.externalDeviceId == "crm-42")

            let byExternal = try await client.admin(.get, "/v1/admin/devices?externalDeviceId=crm-42").decode(DevicePage.self)
            #expect(byExternal.devices.map(\.deviceId) == ["phone"])
        }
    }

    @Test func userDeviceListHidesOtherDevicesPushTokens() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (phone, _) = try await client.register(user: "alice", device: "phone")
            let (tablet, _) = try await client.register(user: "alice", device: "tablet")
            try await client.register(user: "bob", device: "bobs-phone")
            _ = try await client.device(.patch, "/v1/devices/tablet", json: DeviceProfileUpdate(pushToken: "tablet-token"), as: tablet)
            _ = try await client.device(.patch, "/v1/devices/phone", json: DeviceProfileUpdate(pushToken: "phone-token"), as: phone)

            let list = try await client.device(.get, "/v1/devices", as: phone).decode(UserDevicesResponse.self)
            #expect(list.devices.map(\.deviceId) == ["phone", "tablet"])
            #expect(list.devices.first { $0.deviceId == "phone" }?.pushToken == "phone-token")
            #expect(list.devices.first { $0.deviceId == "tablet" }?.pushToken == nil)
            #expect(list.settings == .defaults)
        }
    }

    @Test func aDeviceCannotActAsAnother() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (phone, _) = try await client.register(user: "alice", device: "phone")
            try await client.register(user: "alice", device: "tablet")

            for (method, path) in [
                (HTTPRequest.Method.get, "/v1/devices/tablet"),
                (.post, "/v1/devices/tablet/unregister"),
            ] {
                let response = try await client.device(method, path, as: phone)
                #expect(response.status == .forbidden, "\(method) \(path)")
                #expect(response.errorCode == .forbidden)
            }
            let toggle = try await client.device(.put, "/v1/devices/tablet/download-enabled", json: DownloadEnabledRequest(downloadEnabled: false), as: phone)
            #expect(toggle.status == .forbidden)

            // Claiming the tablet's id with the phone's credential fails the credential check.
            let impostor = DeviceIdentity(deviceId: "tablet", credential: phone.credential)
            let claimed = try await client.device(.get, "/v1/devices/tablet", as: impostor)
            #expect(claimed.status == .unauthorized)
            #expect(claimed.errorCode == .invalidCredentials)

            let tablet = try await client.admin(.get, "/v1/admin/devices/tablet").decode(DeviceResponse.self).device
            #expect(tablet.downloadEnabled)
            #expect(tablet.unregisteredAt == nil)
        }
    }

    @Test func deviceRoutesNeedTheDeviceCredential() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            try await client.register(user: "alice", device: "phone")
            let noCredential = try await client.device(.get, "/v1/devices/phone")
            #expect(noCredential.status == .unauthorized)
            #expect(noCredential.errorCode == .invalidCredentials)

            let unknown = try await client.device(.get, "/v1/devices/ghost", as: DeviceIdentity(deviceId: "ghost", credential: "dc_nope"))
            #expect(unknown.status == .unauthorized)
        }
    }

    /// The user at the device limit frees a place from the phone in hand: the phone turns the
    /// tablet off, then enables itself. Never on for another device, never another user's.
    @Test func aDeviceTurnsDownloadOffForASiblingButNeverOn() async throws {
        let fixture = try await Fixture.make(deviceLimit: 1)
        try await fixture.test { client in
            _ = try await client.register(user: "hal", device: "tablet")
            let (phone, registered) = try await client.register(user: "hal", device: "phone")
            #expect(!registered.device.downloadEnabled)
            _ = try await client.register(user: "ivy", device: "ivy-phone")
            func sibling(_ id: String, _ enabled: Bool) async throws -> TestResponse {
                try await client.device(.put, "/v1/user-devices/\(id)/download-enabled", json: DownloadEnabledRequest(downloadEnabled: enabled), as: phone)
            }
            func enabled(_ id: String) async throws -> Bool {
                try await client.admin(.get, "/v1/admin/devices/\(id)").decode(DeviceResponse.self).device.downloadEnabled
            }

            let on = try await sibling("tablet", true)
            #expect(on.status == .forbidden)
            #expect(on.errorCode == .forbidden)
            let foreign = try await sibling("ivy-phone", false)
            #expect(foreign.status == .notFound)
            #expect(try await sibling("nobody", false).status == .notFound)
            #expect(try await enabled("ivy-phone"))
            #expect(try await enabled("tablet"))

            let off = try await sibling("tablet", false)
            #expect(off.status == .ok)
            #expect(try off.decode(DeviceResponse.self).device.deviceId == "tablet")
            #expect(try await !enabled("tablet"))
            let mine = try await client.device(
                .put, "/v1/devices/phone/download-enabled", json: DownloadEnabledRequest(downloadEnabled: true), as: phone)
            #expect(mine.status == .ok)
            #expect(try await enabled("phone"))
        }
    }

    /// A quiet sync writes nothing: the device's last-seen time is noted in memory, shown in
    /// answers at once, and written with the next batch.
    @Test func lastSeenIsShownAtOnceAndWrittenInBatches() async throws {
        let clock = TestClock()
        let fixture = try await Fixture.make(clock: clock)
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        // No batch is written while the test looks, however slow the machine.
        let configuration = BackplaneConfiguration(
            port: 0, dataDirectory: fixture.directory, logLevel: .error, lastSeenWriteInterval: .seconds(3600))
        try await buildApplication(configuration, services: fixture.services).test(.router) { raw in
            let client = Client(raw: raw, fixture: fixture)
            let (me, registered) = try await client.register(user: "ann", device: "phone")
            clock.advance(by: 120)
            let synced = try await client.device(.post, "/v1/sync", json: SyncRequest(), as: me).decode(SyncResponse.self)
            #expect(synced.device.lastSeenAt.timeIntervalSince(registered.device.lastSeenAt) >= 119)
            let admin = try await client.admin(.get, "/v1/admin/devices/phone").decode(DeviceResponse.self)
            #expect(admin.device.lastSeenAt == synced.device.lastSeenAt)

            // The wire has whole seconds (rounded down), the store milliseconds (rounded to the
            // nearest, which carries into the next second past .9995): not yet written is under 2.
            func stored() async throws -> TimeInterval {
                let device = try await fixture.services.store.device(applicationId: fixture.applicationId, deviceId: "phone")
                return try #require(device).lastSeenAt.timeIntervalSince(registered.device.lastSeenAt)
            }
            #expect(try await stored() < 2)
            #expect(try await fixture.services.lastSeen.flush(to: fixture.services.store) == 1)
            #expect(try await stored() >= 119)
            #expect(try await fixture.services.lastSeen.flush(to: fixture.services.store) == 0)
        }
    }
}
