import Backplane
import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Testing

@Suite struct AdminTests {
    @Test func adminRoutesNeedAnAdminToken() async throws {
        let fixture = try await Fixture.make()
        let cms = try await fixture.services.applications.createToken(applicationId: fixture.applicationId, scope: .cms, name: "cms")
        try await fixture.test { client in
            let none = try await client.raw(.get, "/v1/admin/devices")
            #expect(none.status == .unauthorized)
            #expect(none.errorCode == .invalidCredentials)

            let wrong = try await client.admin(.get, "/v1/admin/devices", token: "bpt_guess")
            #expect(wrong.status == .unauthorized)

            let wrongScope = try await client.admin(.get, "/v1/admin/settings", token: cms)
            #expect(wrongScope.status == .forbidden)
            #expect(wrongScope.errorCode == .forbidden)
            #expect(wrongScope.errorDetails?["requiredScope"] == .string("admin"))

            // A device's signed request is no admin credential either.
            let (me, _) = try await client.register(user: "u", device: "d")
            let asDevice = try await client.device(.get, "/v1/admin/devices", as: me)
            #expect(asDevice.status == .unauthorized)
        }
    }

    @Test func listFiltersAndPaginatesWithACursor() async throws {
        let fixture = try await Fixture.make(deviceLimit: -1)
        try await fixture.test { client in
            for index in 0..<7 {
                try await client.register(user: index < 5 ? "alice" : "bob", device: "dev-\(index)", external: "ext-\(index)")
            }
            var seen: [String] = []
            var cursor: String?
            var pages = 0
            repeat {
                let path = "/v1/admin/devices?userId=alice&limit=2" + (cursor.map { "&cursor=\($0)" } ?? "")
                let page = try await client.admin(.get, path).decode(DevicePage.self)
                #expect(page.devices.count <= 2)
                seen += page.devices.map(\.deviceId)
                cursor = page.nextCursor
                pages += 1
            } while cursor != nil && pages < 10
            #expect(seen == ["dev-0", "dev-1", "dev-2", "dev-3", "dev-4"])
            #expect(pages == 3)

            let byExternal = try await client.admin(.get, "/v1/admin/devices?externalDeviceId=ext-6").decode(DevicePage.self)
            #expect(byExternal.devices.map(\.deviceId) == ["dev-6"])
            #expect(byExternal.nextCursor == nil)

            let all = try await client.admin(.get, "/v1/admin/devices").decode(DevicePage.self)
            #expect(all.devices.count == 7)

            for bad in ["limit=0", "limit=501", "limit=ten", "cursor=garbage", "includeUnregistered=maybe"] {
                let response = try await client.admin(.get, "/v1/admin/devices?\(bad)")
                #expect(response.status == .badRequest, "\(bad)")
            }
        }
    }

    @Test func adminTogglesAndUnregistersWithinTheLimit() async throws {
        let fixture = try await Fixture.make(deviceLimit: 2)
        try await fixture.test { client in
            try await client.register(user: "alice", device: "a")
            try await client.register(user: "alice", device: "b")
            let (cIdentity, c) = try await client.register(user: "alice", device: "c")
            #expect(c.device.downloadEnabled == false)

            let refused = try await client.admin(.put, "/v1/admin/devices/c/download-enabled", json: DownloadEnabledRequest(downloadEnabled: true))
            #expect(refused.status == .conflict)
            #expect(refused.errorCode == .deviceLimitReached)

            let unregistered = try await client.admin(.post, "/v1/admin/devices/a/unregister")
            #expect(try unregistered.decode(DeviceResponse.self).device.unregisteredAt != nil)
            let enabled = try await client.admin(.put, "/v1/admin/devices/c/download-enabled", json: DownloadEnabledRequest(downloadEnabled: true))
            #expect(enabled.status == .ok)
            #expect(try enabled.decode(DeviceResponse.self).device.downloadEnabled)

            // The device sees what the admin did.
            let seen = try await client.device(.get, "/v1/devices/c", as: cIdentity).decode(DeviceResponse.self)
            #expect(seen.device.downloadEnabled)

            // Hidden by default, listed on request; toggling an unregistered device is a conflict.
            let visible = try await client.admin(.get, "/v1/admin/devices").decode(DevicePage.self)
            #expect(visible.devices.map(\.deviceId) == ["b", "c"])
            let audit = try await client.admin(.get, "/v1/admin/devices?includeUnregistered=true").decode(DevicePage.self)
            #expect(audit.devices.map(\.deviceId) == ["a", "b", "c"])
            let toggleGone = try await client.admin(.put, "/v1/admin/devices/a/download-enabled", json: DownloadEnabledRequest(downloadEnabled: true))
            #expect(toggleGone.status == .conflict)

            let missing = try await client.admin(.get, "/v1/admin/devices/nope")
            #expect(missing.status == .notFound)
            #expect(missing.errorCode == .notFound)
            #expect(try await client.admin(.post, "/v1/admin/devices/nope/unregister").status == .notFound)
        }
    }

    @Test func settingsAreReadUpdatedAndValidated() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let initial = try await client.admin(.get, "/v1/admin/settings").decode(SettingsResponse.self)
            #expect(initial.settings == .defaults)
            #expect(initial.applicationId == fixture.applicationId)

            let updated = try await client.admin(.patch, "/v1/admin/settings", json: ApplicationSettingsUpdate { $0.deviceLimit = 2; $0.expiryAfterDownloadSeconds = 86_400; $0.maxDownloadsPerDevice = 25 })
            #expect(updated.status == .ok)
            let settings = try updated.decode(SettingsResponse.self).settings
            #expect(settings.deviceLimit == 2)
            #expect(settings.expiryAfterDownloadSeconds == 86_400)
            #expect(settings.maxDownloadsPerDevice == 25)
            #expect(settings.expiryAfterPlaySeconds == ApplicationSettings.defaults.expiryAfterPlaySeconds)

            for bad in [ApplicationSettingsUpdate { $0.deviceLimit = 1; $0.maxCopiesPerAccount = -2 },
                        ApplicationSettingsUpdate { $0.offlineViewingPeriodSeconds = Int(Int32.max) + 1 }] {
                let response = try await client.admin(.patch, "/v1/admin/settings", json: bad)
                #expect(response.status == .badRequest)
                #expect(response.errorCode == .validationFailed)
            }
            let wrongType = try await client.admin(.patch, "/v1/admin/settings", json: ["deviceLimit": "many"])
            #expect(wrongType.errorCode == .badRequest)

            // Nothing of the refused updates landed, and devices see the new settings.
            let after = try await client.admin(.get, "/v1/admin/settings").decode(SettingsResponse.self)
            #expect(after.settings == settings)
            let (_, registered) = try await client.register(user: "u")
            #expect(registered.settings == settings)
        }
    }

    @Test func keysAreListedAndTheLastOneCannotBeRevoked() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let list = try await client.admin(.get, "/v1/admin/keys").decode(AppKeyList.self)
            #expect(list.keys.map(\.keyId) == [fixture.signer.keyId])
            let lastOne = try await client.admin(.post, "/v1/admin/keys/\(fixture.signer.keyId)/revoke")
            #expect(lastOne.status == .conflict)
            #expect(lastOne.errorCode == .conflict)
            #expect(try await client.admin(.post, "/v1/admin/keys/ak_missing/revoke").status == .notFound)

            let second = try await client.admin(.post, "/v1/admin/keys").decode(CreatedAppKey.self)
            #expect(try await client.admin(.post, "/v1/admin/keys/\(fixture.signer.keyId)/revoke").status == .ok)
            let keys = try await client.admin(.get, "/v1/admin/keys").decode(AppKeyList.self).keys
            #expect(keys.count == 2)
            #expect(keys.first { $0.keyId == second.keyId }?.revokedAt == nil)
            #expect(keys.first { $0.keyId == fixture.signer.keyId }?.revokedAt != nil)
        }
    }

    @Test func applicationsAreIsolated() async throws {
        let fixture = try await Fixture.make()
        let (other, otherKey) = try await fixture.services.applications.createApplication(name: "other")
        let otherAdmin = try await fixture.services.applications.createToken(applicationId: other.id, scope: .admin, name: "other")
        try await fixture.test { client in
            try await client.register(user: "alice", device: "shared-id")
            // The other application's admin neither sees nor touches the first application's device.
            #expect(try await client.admin(.get, "/v1/admin/devices", token: otherAdmin).decode(DevicePage.self).devices.isEmpty)
            #expect(try await client.admin(.get, "/v1/admin/devices/shared-id", token: otherAdmin).status == .notFound)
            // The same device id in the other application is a different device.
            let otherSigner = Signer(keyId: otherKey.keyId, secret: otherKey.secret)
            let response = try await client.device(.post, "/v1/devices/register", json: RegisterDeviceRequest(
                userId: "zed", deviceId: "shared-id", platform: "linux"), signer: otherSigner)
            #expect(response.status == .created)
            let mine = try await client.admin(.get, "/v1/admin/devices/shared-id").decode(DeviceResponse.self)
            #expect(mine.device.userId == "alice")
        }
    }
}
