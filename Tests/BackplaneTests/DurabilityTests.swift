import Backplane
import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Testing

@Suite struct DurabilityTests {
    /// Register over a real socket, stop the server, open the same data directory in a new
    /// store and server: the device, its state and its credential are all still there.
    @Test func registeredDeviceSurvivesARestart() async throws {
        let fixture = try await Fixture.make(deviceLimit: 1)
        defer { try? FileManager.default.removeItem(at: fixture.directory) }

        let identities = Box<(DeviceIdentity, DeviceIdentity)>()
        try await fixture.application().test(.live) { raw in
            let client = Client(raw: raw, fixture: fixture)
            let (first, _) = try await client.register(user: "alice", device: "phone", external: "crm-1")
            _ = try await client.device(.patch, "/v1/devices/phone", json: DeviceProfileUpdate(nickname: "Alice's phone"), as: first)
            let (second, body) = try await client.register(user: "alice", device: "tablet")
            #expect(body.device.downloadEnabled == false)
            identities.value = (first, second)
        }
        let (phone, tablet) = try #require(identities.value)

        let reopened = BackplaneServices(store: try SQLiteStore(directory: fixture.directory))
        let restarted = Fixture(
            directory: fixture.directory, services: reopened, applicationId: fixture.applicationId,
            signer: fixture.signer, adminToken: fixture.adminToken)
        try await restarted.application().test(.live) { raw in
            let client = Client(raw: raw, fixture: restarted)
            let device = try await client.device(.get, "/v1/devices/phone", as: phone).decode(DeviceResponse.self).device
            #expect(device.nickname == "Alice's phone")
            #expect(device.externalDeviceId == "crm-1")
            #expect(device.downloadEnabled)
            // The limit still counts the phone: the tablet cannot be enabled.
            let refused = try await client.device(
                .put, "/v1/devices/tablet/download-enabled", json: DownloadEnabledRequest(downloadEnabled: true), as: tablet)
            #expect(refused.errorCode == .deviceLimitReached)
            let settings = try await client.admin(.get, "/v1/admin/settings").decode(SettingsResponse.self).settings
            #expect(settings.deviceLimit == 1)
        }
    }
}

/// Carries a value out of a `@Sendable` test closure.
final class Box<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value?
    var value: Value? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}
