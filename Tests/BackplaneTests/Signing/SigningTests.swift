import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Testing

@Suite struct SigningTests {
    let registration = RegisterDeviceRequest(userId: "alice", deviceId: "phone", platform: "linux")

    private func registerBody() throws -> Data { try Client.encode(registration) }

    /// Sends the registration with headers the test tampers with, and checks nothing was registered.
    private func expectRefused(
        _ client: Client, status: HTTPResponse.Status, code: ErrorCode,
        headers: HTTPFields, body: Data? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let response = try await client.raw(.post, "/v1/devices/register", headers: headers, body: body ?? registerBody())
        #expect(response.status == status, "\(response.text)", sourceLocation: sourceLocation)
        #expect(response.errorCode == code, "\(response.text)", sourceLocation: sourceLocation)
        let page = try await client.admin(.get, "/v1/admin/devices").decode(DevicePage.self)
        #expect(page.devices.isEmpty, "a refused request registered a device", sourceLocation: sourceLocation)
    }

    @Test func unsignedRequestIsRefused() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            try await expectRefused(client, status: .unauthorized, code: .invalidSignature, headers: [.contentType: "application/json"])
        }
    }

    @Test func wrongSecretIsRefused() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let forged = Signer(keyId: fixture.signer.keyId, secret: "not-the-secret")
            let headers = forged.headers(method: .post, path: "/v1/devices/register", body: try registerBody())
            try await expectRefused(client, status: .unauthorized, code: .invalidSignature, headers: headers)
        }
    }

    @Test func tamperedBodyIsRefused() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let headers = fixture.signer.headers(method: .post, path: "/v1/devices/register", body: try registerBody())
            let other = try Client.encode(RegisterDeviceRequest(userId: "mallory", deviceId: "phone", platform: "linux"))
            try await expectRefused(client, status: .unauthorized, code: .invalidSignature, headers: headers, body: other)
        }
    }

    @Test func signatureCoversThePathAndQuery() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let headers = fixture.signer.headers(method: .post, path: "/v1/devices/register?x=1", body: try registerBody())
            try await expectRefused(client, status: .unauthorized, code: .invalidSignature, headers: headers)
        }
    }

    @Test func staleAndFutureTimestampsAreRefused() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let now = Int64(Date().timeIntervalSince1970)
            // Clear of the 300 s edge: `now` is truncated to whole seconds and time passes while the test runs.
            for timestamp in [now - 330, now + 330] {
                let headers = fixture.signer.headers(method: .post, path: "/v1/devices/register", body: try registerBody(), timestamp: timestamp)
                try await expectRefused(client, status: .unauthorized, code: .staleTimestamp, headers: headers)
            }
            // Inside the window is fine.
            let headers = fixture.signer.headers(method: .post, path: "/v1/devices/register", body: try registerBody(), timestamp: now - 240)
            let accepted = try await client.raw(.post, "/v1/devices/register", headers: headers, body: registerBody())
            #expect(accepted.status == .created, "\(accepted.text)")
        }
    }

    @Test func reusedNonceIsRefused() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice", device: "phone")
            let headers = fixture.signer.headers(
                method: .get, path: "/v1/devices/phone", body: Data(), deviceId: me.deviceId, credential: me.credential,
                nonce: "fixed-nonce-0123456789")
            #expect(try await client.raw(.get, "/v1/devices/phone", headers: headers).status == .ok)
            let replay = try await client.raw(.get, "/v1/devices/phone", headers: headers)
            #expect(replay.status == .unauthorized)
            #expect(replay.errorCode == .nonceReused)
        }
    }

    /// Of one signed request arriving many times at once, one is accepted.
    @Test func aNonceIsAcceptedOnceUnderConcurrency() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice", device: "phone")
            let headers = fixture.signer.headers(
                method: .get, path: "/v1/devices/phone", body: Data(), deviceId: me.deviceId, credential: me.credential)
            let statuses = try await withThrowingTaskGroup(of: TestResponse.self) { group in
                for _ in 0..<50 { group.addTask { try await client.raw(.get, "/v1/devices/phone", headers: headers) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0.status == .ok }.count == 1)
            #expect(statuses.filter { $0.errorCode == .nonceReused }.count == 49)
        }
    }

    /// A replay after a restart is refused, whether the server spent its nonce in memory (the
    /// timestamp is from before the restart: `stale_timestamp`, with the first one accepted) or
    /// kept it on disk (signed ahead of the server's clock, past the lease: `nonce_reused`). A
    /// request signed with the timestamp the refusal names is accepted.
    @Test func aRequestAcceptedBeforeARestartIsRefusedAfterIt() async throws {
        let fixture = try await Fixture.make()
        let (identity, accepted) = try await Self.registerAndSign(fixture)
        #expect(accepted.status == .ok)
        let aheadHeaders = Box<HTTPFields>()
        try await fixture.application().test(.router) { raw in
            let client = Client(raw: raw, fixture: fixture)
            let headers = fixture.signer.headers(
                method: .get, path: "/v1/devices/phone", body: Data(), deviceId: identity.deviceId, credential: identity.credential,
                timestamp: Int64(Date().timeIntervalSince1970) + 120)
            let response = try await client.raw(.get, "/v1/devices/phone", headers: headers)
            #expect(response.status == .ok)
            aheadHeaders.value = headers
        }

        try await fixture.restarted().test { client in
            let replay = try await client.raw(.get, "/v1/devices/phone", headers: accepted.headers)
            #expect(replay.status == .unauthorized)
            #expect(replay.errorCode == .staleTimestamp, "\(replay.text)")
            let notBefore = try #require(try replay.decode(ErrorBody.self).error.details?["notBefore"]?.intValue)
            let signedAt = try #require(accepted.headers[HTTPField.Name(RequestSigning.Header.timestamp)!].flatMap { Int64($0) })
            #expect(notBefore > signedAt && notBefore <= Int64(Date().timeIntervalSince1970) + 2)

            let aheadReplay = try await client.raw(.get, "/v1/devices/phone", headers: try #require(aheadHeaders.value))
            #expect(aheadReplay.errorCode == .nonceReused, "\(aheadReplay.text)")

            let fresh = fixture.signer.headers(
                method: .get, path: "/v1/devices/phone", body: Data(), deviceId: identity.deviceId, credential: identity.credential,
                timestamp: notBefore)
            #expect(try await client.raw(.get, "/v1/devices/phone", headers: fresh).status == .ok)
        }
    }

    /// Registers a device and sends one signed request; returns the identity and that request's headers and status.
    private static func registerAndSign(_ fixture: Fixture) async throws -> (DeviceIdentity, (headers: HTTPFields, status: HTTPResponse.Status)) {
        let result = Box<(DeviceIdentity, (headers: HTTPFields, status: HTTPResponse.Status))>()
        try await fixture.application().test(.router) { raw in
            let client = Client(raw: raw, fixture: fixture)
            let (me, _) = try await client.register(user: "alice", device: "phone")
            let headers = fixture.signer.headers(
                method: .get, path: "/v1/devices/phone", body: Data(), deviceId: me.deviceId, credential: me.credential)
            let response = try await client.raw(.get, "/v1/devices/phone", headers: headers)
            result.value = (me, (headers, response.status))
        }
        return try #require(result.value)
    }

    @Test func malformedNonceAndTimestampAreRefused() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let short = fixture.signer.headers(method: .post, path: "/v1/devices/register", body: try registerBody(), nonce: "short")
            try await expectRefused(client, status: .unauthorized, code: .invalidSignature, headers: short)
            var badTime = fixture.signer.headers(method: .post, path: "/v1/devices/register", body: try registerBody())
            badTime[HTTPField.Name(RequestSigning.Header.timestamp)!] = "yesterday"
            try await expectRefused(client, status: .unauthorized, code: .invalidSignature, headers: badTime)
        }
    }

    /// 16 to 64 of `[A-Za-z0-9_-]`: the characters either side of each range, and letters of
    /// other scripts (several UTF-8 bytes each), are refused.
    @Test func nonceAlphabetAndLength() {
        let valid = "Az09-_" + String(repeating: "x", count: 10)
        #expect(RequestSigning.isValidNonce(valid))
        #expect(RequestSigning.isValidNonce(String(repeating: "a", count: 64)))
        #expect(!RequestSigning.isValidNonce(String(repeating: "a", count: 15)))
        #expect(!RequestSigning.isValidNonce(String(repeating: "a", count: 65)))
        for outside in ["@", "[", "`", "{", "/", ":", " ", ".", "=", "\0", "é", "٣", "Ａ"] {
            #expect(!RequestSigning.isValidNonce(String(valid.dropLast()) + outside), "\(outside)")
        }
        // 8 characters of 2 bytes each: 16 bytes, but not 16 allowed characters.
        #expect(!RequestSigning.isValidNonce(String(repeating: "é", count: 8)))
    }

    @Test func unknownAndRevokedKeysAreRefusedAndANewKeyWorks() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let unknown = Signer(keyId: "ak_unknown", secret: fixture.signer.secret)
            try await expectRefused(
                client, status: .unauthorized, code: .invalidCredentials,
                headers: unknown.headers(method: .post, path: "/v1/devices/register", body: try registerBody()))

            // Rotation: add a key, revoke the old one; the old one stops working, the new one works.
            let created = try await client.admin(.post, "/v1/admin/keys")
            #expect(created.status == .created)
            let newKey = try created.decode(CreatedAppKey.self)
            // Never starting with "-", so `--secret <it>` on a command line is not taken for an option.
            #expect(newKey.secret.hasPrefix("aks_") && newKey.secret.count == 4 + 43)
            let revoked = try await client.admin(.post, "/v1/admin/keys/\(fixture.signer.keyId)/revoke")
            #expect(revoked.status == .ok)
            #expect(try revoked.decode(AppKey.self).revokedAt != nil)
            try await expectRefused(
                client, status: .unauthorized, code: .invalidCredentials,
                headers: fixture.signer.headers(method: .post, path: "/v1/devices/register", body: try registerBody()))

            let rotated = Signer(keyId: newKey.keyId, secret: newKey.secret)
            let response = try await client.device(.post, "/v1/devices/register", json: registration, signer: rotated)
            #expect(response.status == .created)
        }
    }
}
