import Backplane
import Foundation
import Hummingbird
import HummingbirdTesting
import BackplaneWire
import Testing
import TestSupport

/// Rate limits per device and per client address (429 with `Retry-After`), and admin PATCH
/// bodies that name a field the route does not know.
@Suite struct ProtocolMannersTests {
    @Test func aDeviceOverItsRateGets429WithRetryAfterAndItsRequestStaysUsable() async throws {
        let fixture = try await Fixture.make()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        // A rate so slow that no token comes back while the test runs, however loaded the machine.
        let limits = RateLimits(deviceRate: 0.001, deviceBurst: 3, addressRate: 0, addressBurst: 0)
        let limited = Application(router: buildRouter(fixture.services, rateLimits: limits))
        let open = Application(router: buildRouter(fixture.services))
        try await limited.test(.router) { raw in
            let client = Client(raw: raw, fixture: fixture)
            let (phone, _) = try await client.register(user: "alice", device: "phone")
            let (tablet, _) = try await client.register(user: "alice", device: "tablet")
            for _ in 0..<3 { #expect(try await client.device(.post, "/v1/sync", json: SyncRequest(), as: phone).status == .ok) }

            // The fourth: refused, with when to come back; signed like any other request.
            let body = try Client.encode(SyncRequest())
            let headers = fixture.signer.headers(
                method: .post, path: "/v1/sync", body: body, deviceId: phone.deviceId, credential: phone.credential)
            let refused = try await client.raw(.post, "/v1/sync", headers: headers, body: body)
            #expect(refused.status == .tooManyRequests)
            #expect(refused.errorCode == .rateLimited)
            let retryAfter = try #require(refused.headers[.retryAfter].flatMap { Int($0) })
            #expect((900...1000).contains(retryAfter), "one token at 0.001/s is 1000 s away")

            // Another device of the same user has its own bucket.
            #expect(try await client.device(.post, "/v1/sync", json: SyncRequest(), as: tablet).status == .ok)

            // The refused request did not spend its nonce: the same bytes are taken where no limit holds.
            try await open.test(.router) { other in
                let again = try await other.execute(uri: "/v1/sync", method: .post, headers: headers, body: ByteBuffer(bytes: body))
                #expect(again.status == .ok)
            }
        }
    }

    @Test func anAddressOverItsRateGets429ButHealthChecksAndOtherAddressesDoNot() async throws {
        let fixture = try await Fixture.make()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        let limits = RateLimits(deviceRate: 0, deviceBurst: 0, addressRate: 0.001, addressBurst: 2, addressFromForwardedFor: true)
        let app = Application(router: buildRouter(fixture.services, rateLimits: limits))
        try await app.test(.live) { raw in
            let client = Client(raw: raw, fixture: fixture)
            func settings(from address: String) async throws -> TestResponse {
                var headers = HTTPFields()
                headers[.authorization] = "Bearer \(fixture.adminToken)"
                // Behind a proxy: the last entry is the one it appended.
                headers[.init("X-Forwarded-For")!] = "10.9.9.9, \(address)"
                return try await client.raw(.get, "/v1/admin/settings", headers: headers)
            }
            #expect(try await settings(from: "192.0.2.1").status == .ok)
            #expect(try await settings(from: "192.0.2.1").status == .ok)
            let refused = try await settings(from: "192.0.2.1")
            #expect(refused.status == .tooManyRequests)
            #expect(refused.headers[.retryAfter] != nil)
            #expect(refused.text.contains("\"scope\":\"address\""))
            #expect(try await settings(from: "192.0.2.2").status == .ok)
            for _ in 0..<10 { #expect(try await client.raw(.get, "/healthz").status == .ok) }
        }
    }

    @Test func anAdminPatchWithAnUnknownFieldIsRefusedAndChangesNothing() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let misspelt = try await client.admin(.patch, "/v1/admin/settings", json: ["devicelimit": 3, "deviceLimit": 2])
            #expect(misspelt.status == .badRequest)
            #expect(misspelt.errorCode == .validationFailed)
            #expect(misspelt.text.contains("devicelimit"))
            let settings = try await client.admin(.get, "/v1/admin/settings").decode(SettingsResponse.self)
            #expect(settings.settings.deviceLimit == ApplicationSettings.defaults.deviceLimit)

            let good = try await client.admin(.patch, "/v1/admin/settings", json: ["deviceLimit": 2])
            #expect(good.status == .ok)
            #expect(try good.decode(SettingsResponse.self).settings.deviceLimit == 2)
        }
    }
}
