import Backplane
import Foundation
import GRDB
import Hummingbird
import HummingbirdTesting
import BackplaneWire
import Testing
import TestSupport

/// What one holder of the app key (it ships in every copy of the app) can do to a node: not
/// register without bound, and not hold every connection slot through one device's channels.
@Suite(.serialized) struct RegistrationAbuseTests {
    /// Signed registration bytes for `device` of `user`, with its device key's proof.
    private static func registration(_ fixture: Fixture, user: String, device: String) throws -> (headers: HTTPFields, body: Data) {
        let key = fixture.deviceKeys.key(for: device)
        let body = try Client.encode(RegisterDeviceRequest(
            userId: user, deviceId: device, platform: "linux", devicePublicKey: DeviceKeys.publicKey(key)))
        return (fixture.signer.headers(method: .post, path: "/v1/devices/register", body: body, proofKey: key), body)
    }

    @Test func registrationsPastTheUsersOrTheAddresssRateGet429AndWriteNothing() async throws {
        let fixture = try await Fixture.make()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        // The defaults but for the rates, slowed so that no token comes back while the test runs.
        var limits = RateLimits()
        limits.registrationUserRate = 0.001
        limits.registrationUserBurst = 30
        limits.registrationAddressRate = 0.001
        limits.registrationAddressBurst = 50
        limits.addressFromForwardedFor = true
        let app = Application(router: buildRouter(fixture.services, rateLimits: limits))
        try await app.test(.router) { raw in
            let client = Client(raw: raw, fixture: fixture)
            func register(_ user: String, _ device: String, from address: String) async throws -> TestResponse {
                var (headers, body) = try Self.registration(fixture, user: user, device: device)
                headers[.init("X-Forwarded-For")!] = address
                return try await client.raw(.post, "/v1/devices/register", headers: headers, body: body)
            }
            // One user from one address, as fast as it can: the user's burst, then 429.
            var statuses: [HTTPResponse.Status] = []
            for index in 0..<60 { statuses.append(try await register("victim", "v\(index)", from: "192.0.2.1").status) }
            #expect(statuses.prefix(30).allSatisfy { $0 == .created })
            #expect(statuses.dropFirst(30).allSatisfy { $0 == .tooManyRequests })
            let refused = try await register("victim", "v-last", from: "192.0.2.9")
            #expect(refused.status == .tooManyRequests)
            #expect(refused.errorCode == .rateLimited)
            #expect(refused.headers[.retryAfter].flatMap { Int($0) }.map { $0 > 0 } == true)
            #expect(refused.text.contains("\"scope\":\"registration user\""))
            // Nothing was written for the refused ones.
            let listed = try await client.admin(.get, "/v1/admin/devices?userId=victim&limit=500")
            #expect(try listed.decode(DevicePage.self).devices.count == 30)

            // Other users from the same address: that address's burst (the refused above counted).
            var fromOne: [HTTPResponse.Status] = []
            for index in 0..<30 { fromOne.append(try await register("user-\(index)", "u\(index)", from: "192.0.2.1").status) }
            #expect(fromOne.contains(.tooManyRequests))
            let addressRefusal = try await register("someone", "s1", from: "192.0.2.1")
            #expect(addressRefusal.text.contains("\"scope\":\"registration address\""))
            // Another address is not held up.
            #expect(try await register("someone", "s2", from: "192.0.2.2").status == .created)
        }
    }

    @Test func aUsersRegisteredDevicesAreBounded() async throws {
        let fixture = try await Fixture.make()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        try await fixture.test { client in
            let most = WireLimits.maxRegisteredDevicesPerUser
            // One registered through the API, then copied to the bound in one transaction: a
            // thousand registrations would hold the test run's few threads for a long while.
            _ = try await client.register(user: "hoarder", device: "h0")
            let database = try DatabaseQueue(path: fixture.directory.appendingPathComponent("backplane.sqlite").path)
            try await database.write { db in
                let columns = try Row.fetchAll(db, sql: "PRAGMA table_info(devices)").map { $0["name"] as String }.filter { $0 != "row_id" }
                let copied = columns.map { $0 == "device_id" ? "'h' || n" : $0 }.joined(separator: ", ")
                try db.execute(sql: """
                    WITH RECURSIVE numbers(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM numbers WHERE n < \(most - 1))
                    INSERT INTO devices (\(columns.joined(separator: ", ")))
                    SELECT \(copied) FROM devices, numbers WHERE device_id = 'h0'
                    """)
            }
            try await database.close()
            let (headers, body) = try Self.registration(fixture, user: "hoarder", device: "one-too-many")
            let refused = try await client.raw(.post, "/v1/devices/register", headers: headers, body: body)
            #expect(refused.status == .conflict)
            #expect(refused.errorCode == .conflict)
            #expect(refused.text.contains("\"limit\":\(most)"))
            // Moving a device of another user in is one more too.
            let (_, other) = try await client.register(user: "someone-else", device: "mover")
            #expect(other.outcome == .created)
            let key = fixture.deviceKeys.key(for: "mover")
            let moved = try await client.device(.post, "/v1/devices/register", json: RegisterDeviceRequest(
                userId: "hoarder", deviceId: "mover", platform: "linux", moveFromOtherUser: true, devicePublicKey: DeviceKeys.publicKey(key)),
                proofKey: key)
            #expect(moved.status == .conflict)
            // Releasing one makes room.
            let h1 = try await client.admin(.post, "/v1/admin/devices/h1/release")
            #expect(h1.status == .ok)
            let (_, made) = try await client.register(user: "hoarder", device: "one-too-many")
            #expect(made.outcome == .created)
        }
    }

    @Test func oneDevicesChannelsCannotTakeEveryConnectionSlot() async throws {
        let fixture = try await Fixture.make()
        try await RealPort.serve(fixture, limits: TransportLimits(maxConnections: 6)) { port in
            let phone = try await RealPort.register(fixture, port: port, device: "phone")
            var channels: [FrameReader] = []
            // More channels than the node has slots: each new one closes the device's oldest.
            for _ in 0..<10 { channels.append(FrameReader(try await RealPort.openChannel(fixture, port: port, as: phone))) }
            let deadline = ContinuousClock.now + .seconds(30)
            while fixture.services.wakeUpHub.channelCount > WakeUpHub.maxChannelsPerDevice, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(fixture.services.wakeUpHub.channelCount == WakeUpHub.maxChannelsPerDevice)
            // The oldest were told "going away", and the node still answers others.
            let oldest = try #require(await channels[0].next())
            #expect(oldest.opcode == 0x8 && oldest.payload == Data([0x03, 0xE9]))
            let health = try RawConnection(port: port)
            await health.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(await health.readResponse(timeout: 15)?.status == 200)
            // The newest is open: a ping is answered.
            #expect(await channels[9].connection.send(WebSocketBytes.masked(opcode: 0x9, Data("hi".utf8))))
            #expect(await channels[9].next()?.opcode == 0xA)
        }
    }
}
