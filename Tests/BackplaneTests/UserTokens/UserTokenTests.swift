import Backplane
import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Testing
import TestSupport
import JWTKit

/// Verified users (`/v1/admin/user-identity`, `X-Backplane-User-Token`): every refusal, the
/// attacker holding only the app key, the events a device logs, and the admin API.
@Suite struct UserTokenTests {
    let issuer = TokenIssuer()

    @Test func aValidTokenRegistersTheDeviceAndEveryRefusalSaysWhyAndChangesNothing() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            #expect(try await client.setUserIdentity(issuer.configuration()).status == .ok)
            typealias Case = (name: String, token: String?, status: HTTPResponse.Status, code: ErrorCode, says: String)
            let other = P256Key()
            let cases: [Case] = [
                ("missing", nil, .unauthorized, .userTokenRequired, "requires a user token"),
                ("foreign key", try await issuer.es256Token(TokenIssuer.claims(user: "alice"), key: other.key), .unauthorized, .userTokenInvalid,
                 "signature does not verify"),
                ("another user's sub", try await issuer.es256Token(TokenIssuer.claims(user: "mallory")), .forbidden, .userTokenMismatch,
                 "another user"),
                ("expired", try await issuer.es256Token(TokenIssuer.claims(user: "alice", now: Date().addingTimeInterval(-600))),
                 .unauthorized, .userTokenInvalid, "expired"),
                ("wrong audience", try await issuer.es256Token(TokenIssuer.claims(user: "alice", audience: "another-service")),
                 .unauthorized, .userTokenInvalid, "audience"),
                ("wrong issuer", try await issuer.es256Token(TokenIssuer.claims(user: "alice", issuer: "https://evil.example")),
                 .unauthorized, .userTokenInvalid, "issuer"),
                ("no expiry", try await issuer.es256Token(TokenIssuer.claims(user: "alice", lifetime: nil)), .unauthorized, .userTokenInvalid,
                 "no expiry"),
                ("a week long", try await issuer.es256Token(TokenIssuer.claims(user: "alice", lifetime: 7 * 86400)), .unauthorized,
                 .userTokenInvalid, "longer than 24 hours"),
                ("alg none", try TokenIssuer.unsignedToken(TokenIssuer.claims(user: "alice")), .unauthorized, .userTokenInvalid, "'none'"),
                // Algorithm confusion: the ES256 key's public bytes taken as an HMAC secret.
                ("HS256 against a key pair", try await issuer.hs256Token(
                    TokenIssuer.claims(user: "alice"), secret: issuer.es256.publicKey.pemRepresentation, kid: issuer.es256Kid),
                 .unauthorized, .userTokenInvalid, "HS256 is accepted only"),
                ("unknown kid", try await issuer.es256Token(TokenIssuer.claims(user: "alice"), kid: "es-2"), .unauthorized, .userTokenInvalid,
                 "no key 'es-2'"),
                ("not a JWT", "not.a.jwt", .unauthorized, .userTokenInvalid, "not a signed JWT"),
            ]
            for test in cases {
                let response = try await client.register(user: "alice", device: "phone", token: test.token)
                #expect(response.status == test.status, "\(test.name): \(response.text)")
                #expect(response.errorCode == test.code, "\(test.name): \(response.text)")
                #expect(response.errorMessage.contains(test.says), "\(test.name): \(response.errorMessage)")
                if let token = test.token, token.count > 20 {
                    #expect(!response.text.contains(token), "\(test.name): the answer repeats the token")
                }
            }
            let none = try await client.admin(.get, "/v1/admin/devices?userId=alice&includeUnregistered=true").decode(DevicePage.self)
            #expect(none.devices.isEmpty, "a refused registration stored a device")

            // ES256 and EdDSA tokens of the user register; the device then needs no token.
            let created = try await client.register(user: "alice", device: "phone", token: try await issuer.es256Token(TokenIssuer.claims(user: "alice")))
            #expect(created.status == .created, "\(created.text)")
            let tablet = try await client.register(user: "alice", device: "tablet", token: try await issuer.edToken(TokenIssuer.claims(user: "alice")))
            #expect(tablet.status == .created, "\(tablet.text)")
            let phone = try created.identity()
            #expect(try await client.device(.get, "/v1/devices", as: phone).status == .ok)
            // The same install again, proving itself, is the same binding: no token needed.
            let again = try await client.register(user: "alice", device: "phone", token: nil)
            #expect(again.status == .ok, "\(again.text)")
            #expect(try again.decode(RegisterDeviceResponse.self).outcome == .existing)
            // Moving it to another user is a new binding: that user's token, and only that.
            let moveBare = try await client.register(user: "bob", device: "phone", token: nil, move: true)
            #expect(moveBare.errorCode == .userTokenRequired)
            let moveAsAlice = try await client.register(
                user: "bob", device: "phone", token: try await issuer.es256Token(TokenIssuer.claims(user: "alice")), move: true)
            #expect(moveAsAlice.errorCode == .userTokenMismatch)
            let moved = try await client.register(
                user: "bob", device: "phone", token: try await issuer.es256Token(TokenIssuer.claims(user: "bob")), move: true)
            #expect(try moved.decode(RegisterDeviceResponse.self).outcome == .moved, "\(moved.text)")
        }
    }

    /// RS256 with a 2048-bit key openssl made, as a backend's PEM would be.
    @Test func anRS256TokenRegistersAndItsKeyVerifiesNothingElse() async throws {
        guard let openssl = TestCertificates.openssl else {
            if ProcessInfo.processInfo.environment["BACKPLANE_REQUIRE_DEPLOY_TOOLS"] == "1" { Issue.record("openssl is not installed") }
            return
        }
        let directory = temporaryDirectory("backplane-rs256")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let pem = directory.appendingPathComponent("rs256.pem")
        let made = try await ChildProcess.run(openssl, ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", pem.path])
        try #require(made.status == 0, "\(made.output)")
        let privateKey = try Insecure.RSA.PrivateKey(pem: try String(contentsOf: pem, encoding: .utf8))
        let (modulus, exponent) = try privateKey.publicKey.getKeyPrimitives()
        let jwks: JSONValue = .object(["keys": .array([.object([
            "kty": .string("RSA"), "kid": .string("rs-1"), "alg": .string("RS256"),
            "n": .string(Base64URL.encode(modulus)), "e": .string(Base64URL.encode(exponent)),
        ])])])
        let signer = JWTKeyCollection()
        await signer.add(rsa: privateKey, digestAlgorithm: .sha256, kid: "rs-1")
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let update = UserIdentityUpdate(required: true, issuer: TokenIssuer.issuer, audience: TokenIssuer.audience, jwks: jwks)
            #expect(try await client.setUserIdentity(update).status == .ok)
            let token = try await signer.sign(TokenIssuer.claims(user: "alice"), kid: "rs-1")
            let created = try await client.register(user: "alice", device: "phone", token: token)
            #expect(created.status == .created, "\(created.text)")
            // The RSA key's public PEM as an HMAC secret: refused, not checked as HS256.
            let confused = try await issuer.hs256Token(
                TokenIssuer.claims(user: "alice"), secret: try privateKey.publicKey.pemRepresentation, kid: "rs-1")
            let refused = try await client.register(user: "alice", device: "tablet", token: confused)
            #expect(refused.errorCode == .userTokenInvalid && refused.errorMessage.contains("HS256"), "\(refused.text)")
        }
    }

    @Test func withOnlyTheAppKeyNoOneActsAsAnotherUser() async throws {
        let fixture = try await Fixture.make(deviceLimit: 2)
        try await fixture.test { client in
            #expect(try await client.setUserIdentity(issuer.configuration()).status == .ok)
            let victimPhone = try await client.register(
                user: "victim", device: "victim-phone", token: try await issuer.es256Token(TokenIssuer.claims(user: "victim")))
            #expect(victimPhone.status == .created)
            // The attacker holds the app key and a key pair of their own, but no token from the app's backend.
            let attackerKey = P256Key()
            let forged = try await issuer.es256Token(TokenIssuer.claims(user: "victim"), key: attackerKey.key)
            for (index, token) in [nil, forged, try TokenIssuer.unsignedToken(TokenIssuer.claims(user: "victim"))].enumerated() {
                let response = try await client.register(user: "victim", device: "attacker-\(index)", token: token)
                #expect(response.status == .unauthorized, "\(response.text)")
            }
            // So the attacker has no device of the victim's: the victim's devices stay as they were,
            // and the victim's second device still fits the limit of 2.
            let devices = try await client.admin(.get, "/v1/admin/devices?userId=victim&includeUnregistered=true").decode(DevicePage.self)
            #expect(devices.devices.map(\.deviceId) == ["victim-phone"])
            #expect(devices.devices.first?.downloadEnabled == true)
            let tablet = try await client.register(
                user: "victim", device: "victim-tablet", token: try await issuer.es256Token(TokenIssuer.claims(user: "victim")))
            #expect(try tablet.decode(RegisterDeviceResponse.self).device.downloadEnabled)
        }
    }

    @Test func tokensNotRequiredAreStillCheckedWhenSentAndCounted() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            // No configuration: a token is neither asked for nor read.
            #expect(try await client.register(user: "alice", device: "d0", token: "garbage").status == .created)
            #expect(try await client.setUserIdentity(issuer.configuration(required: false, withSecret: true)).status == .ok)
            #expect(try await client.register(user: "alice", device: "d1", token: nil).status == .created)
            let bad = try await client.register(user: "alice", device: "d2", token: try await issuer.es256Token(TokenIssuer.claims(user: "bob")))
            #expect(bad.errorCode == .userTokenMismatch)
            let shared = try await client.register(user: "alice", device: "d3", token: try await issuer.hs256Token(TokenIssuer.claims(user: "alice")))
            #expect(shared.status == .created, "\(shared.text)")
            let metrics = String(decoding: try await client.raw(.get, "/metrics").body.readableBytesView, as: UTF8.self)
            for line in [
                #"backplane_registration_user_tokens_total{token="absent"} 1"#,
                #"backplane_registration_user_tokens_total{token="refused"} 1"#,
                #"backplane_registration_user_tokens_total{token="verified"} 1"#,
            ] {
                #expect(metrics.contains(line), "missing \(line)")
            }
        }
    }

    @Test func aDeviceLogsEventsForItsOwnUserOnly() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (device, _) = try await client.register(user: "alice", device: "phone")
            func event(_ sequence: Int64, user: String) -> DeviceEvent {
                DeviceEvent(eventId: UUID().uuidString, sequence: sequence, deviceTime: Date(), platform: "linux", userId: user, content: .appLaunch)
            }
            let batch = EventBatch(sentAt: Date(), events: [event(1, user: "alice"), event(2, user: "victim")])
            let answer = try await client.device(.post, "/v1/events", json: batch, as: device).decode(EventBatchResponse.self)
            #expect(answer.results.map(\.status) == [.accepted, .rejected])
            #expect(answer.results[1].field == "userId")
            #expect(answer.results[1].code == .validationFailed)
            let victims = try await fixture.services.events.list(
                applicationId: fixture.applicationId, filter: EventFilter(userId: "victim"), cursor: nil, limit: nil)
            #expect(victims.events.isEmpty)
        }
    }

    @Test func theAdminAPISetsShowsAndRemovesTheConfigurationAndRefusesWhatItCannotUse() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let empty = try await client.admin(.get, "/v1/admin/user-identity").decode(UserIdentityResponse.self)
            #expect(empty.configuration == nil)
            var update = issuer.configuration(withSecret: true)
            let set = try await client.setUserIdentity(update)
            #expect(set.status == .ok)
            #expect(!set.text.contains(issuer.secret), "the secret is shown back")
            let shown = try await client.admin(.get, "/v1/admin/user-identity").decode(UserIdentityResponse.self).configuration
            #expect(shown?.hs256SecretSet == true && shown?.required == true && shown?.jwks == issuer.jwks())
            // Left out, the secret is kept; an empty one removes it.
            update.hs256Secret = nil
            update.required = false
            #expect(try await client.setUserIdentity(update).decode(UserIdentityResponse.self).configuration?.hs256SecretSet == true)
            update.hs256Secret = ""
            #expect(try await client.setUserIdentity(update).decode(UserIdentityResponse.self).configuration?.hs256SecretSet == false)

            let privateKey: JSONValue = .object(["keys": .array([.object([
                "kty": .string("OKP"), "crv": .string("Ed25519"), "x": .string("AAAA"), "d": .string("BBBB")])])])
            let refusals: [(UserIdentityUpdate, HTTPResponse.Status, String)] = [
                (UserIdentityUpdate(required: true, issuer: "i", audience: "a", jwks: privateKey), .badRequest, "jwks"),
                (UserIdentityUpdate(required: true, issuer: "i", audience: "a", jwks: .object(["keys": .array([.object([
                    "kty": .string("EC"), "crv": .string("P-384"), "x": .string("AA"), "y": .string("AA")])])])), .badRequest, "jwks"),
                (UserIdentityUpdate(required: true, issuer: "i", audience: "a", jwks: .string("keys")), .badRequest, "jwks"),
                (UserIdentityUpdate(required: true, issuer: "i", audience: "a", hs256Secret: "short"), .badRequest, "hs256Secret"),
                (UserIdentityUpdate(required: true, issuer: "", audience: "a", jwks: issuer.jwks()), .badRequest, "issuer"),
                (UserIdentityUpdate(required: true, issuer: "i", audience: "a"), .badRequest, "jwks"),
                // This server does not fetch key-set URLs (its operator did not allow it).
                (UserIdentityUpdate(required: true, issuer: "i", audience: "a", jwksUrl: "https://keys.example.com/jwks.json"), .forbidden, "jwksUrl"),
            ]
            for (body, status, field) in refusals {
                let response = try await client.setUserIdentity(body)
                #expect(response.status == status, "\(response.text)")
                #expect(response.errorDetails?["field"] == .string(field), "\(response.text)")
            }
            let unchanged = try await client.admin(.get, "/v1/admin/user-identity").decode(UserIdentityResponse.self).configuration
            #expect(unchanged?.required == false && unchanged?.issuer == TokenIssuer.issuer)

            #expect(try await client.admin(.delete, "/v1/admin/user-identity").status == .noContent)
            #expect(try await client.admin(.delete, "/v1/admin/user-identity").status == .notFound)
            #expect(try await client.register(user: "alice", device: "d", token: nil).status == .created)
        }
    }
}

/// A key pair the app's backend does not hold.
struct P256Key: Sendable {
    let key = P256.Signing.PrivateKey()
}
