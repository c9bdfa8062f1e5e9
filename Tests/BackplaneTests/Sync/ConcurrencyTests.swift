import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Testing

/// The device limit's check-and-set must hold under concurrent requests for one user.
@Suite struct ConcurrencyTests {
    /// In process every registration runs at once (256, so that many share each commit); over HTTP, async-http-client spreads them over
    /// its pool of connections (HummingbirdTesting's `.live` client pipelines everything on one
    /// connection, which the server answers in turn, so it would test no concurrency at all).
    /// Over HTTP the client's deadline and its pool's connect timeout cover the wait for a
    /// pooled connection, so the count stays small (more than the pool's 8 connections and the
    /// limit of 3) for a loaded CI machine.
    @Test(arguments: [(TestingSetup.router, 256), (.ahc(.http), 12)])
    func concurrentRegistrationsEnableExactlyTheLimit(setup: TestingSetup, registrations: Int) async throws {
        let fixture = try await Fixture.make(deviceLimit: 3)
        try await fixture.test(setup) { client in
            let results = try await withThrowingTaskGroup(of: RegisterDeviceResponse.self) { group in
                for index in 0..<registrations {
                    group.addTask { try await client.register(user: "family", device: "device-\(index)").1 }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.count == registrations)
            #expect(results.filter(\.device.downloadEnabled).count == 3)
            #expect(results.filter(\.deviceLimitReached).count == registrations - 3)
            let page = try await client.admin(.get, "/v1/admin/devices?userId=family&limit=500").decode(DevicePage.self)
            #expect(page.devices.count == registrations)
            #expect(page.devices.filter(\.downloadEnabled).count == 3)
        }
    }

    @Test func concurrentEnableRequestsEnableExactlyTheLimit() async throws {
        let fixture = try await Fixture.make(deviceLimit: 0)
        try await fixture.test { client in
            var identities: [DeviceIdentity] = []
            for index in 0..<100 {
                identities.append(try await client.register(user: "family", device: "device-\(index)").0)
            }
            _ = try await client.admin(.patch, "/v1/admin/settings", json: ApplicationSettingsUpdate { $0.deviceLimit = 3 })
            let statuses = try await withThrowingTaskGroup(of: (HTTPResponse.Status, ErrorCode?).self) { group in
                for identity in identities {
                    group.addTask {
                        let response = try await client.device(
                            .put, "/v1/devices/\(identity.deviceId)/download-enabled",
                            json: DownloadEnabledRequest(downloadEnabled: true), as: identity)
                        return (response.status, response.errorCode)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0.0 == .ok }.count == 3)
            #expect(statuses.filter { $0.1 == .deviceLimitReached }.count == 97)
            let list = try await client.device(.get, "/v1/devices", as: identities[0]).decode(UserDevicesResponse.self)
            #expect(list.downloadEnabledCount == 3)
        }
    }

    @Test func concurrentAdminEnablesRespectTheLimit() async throws {
        let fixture = try await Fixture.make(deviceLimit: 0)
        try await fixture.test { client in
            for index in 0..<50 { try await client.register(user: "family", device: "device-\(index)") }
            _ = try await client.admin(.patch, "/v1/admin/settings", json: ApplicationSettingsUpdate { $0.deviceLimit = 2 })
            let oks = try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<50 {
                    group.addTask {
                        try await client.admin(.put, "/v1/admin/devices/device-\(index)/download-enabled",
                                               json: DownloadEnabledRequest(downloadEnabled: true)).status == .ok
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(oks == 2)
        }
    }
}
