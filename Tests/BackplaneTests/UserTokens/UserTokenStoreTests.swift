import Backplane
import Foundation
import JWTKit
import BackplaneWire
import Testing
import TestSupport

/// User tokens on every store: the configuration is kept as set (the secret included, never
/// shown), and a registration is checked against it the same way on SQLite and PostgreSQL.
@Suite struct UserTokenStoreTests {
    /// An application with an admin token on a new store of `kind`.
    static func fixture(on kind: StoreKind) async throws -> (any BackplaneStore, Fixture) {
        let store = try await kind.make()
        let services = BackplaneServices(store: store)
        let (application, key) = try await services.testApplication(name: "user tokens")
        let adminToken = try await services.applications.createToken(applicationId: application.id, scope: .admin, name: "tests")
        let fixture = Fixture(
            directory: temporaryDirectory("backplane-user-tokens"), services: services, applicationId: application.id,
            signer: Signer(keyId: key.keyId, secret: key.secret), adminToken: adminToken)
        return (store, fixture)
    }

    @Test(arguments: StoreKind.allCases)
    func aValidTokenRegistersAndNoneIsRefusedOnEveryStore(_ kind: StoreKind) async throws {
        let (store, fixture) = try await Self.fixture(on: kind)
        let issuer = TokenIssuer()
        try await fixture.test { client in
            #expect(try await client.setUserIdentity(issuer.configuration(withSecret: true)).status == .ok)
            let refused = try await client.register(user: "alice", device: "phone", token: nil)
            #expect(refused.errorCode == .userTokenRequired)
            let created = try await client.register(user: "alice", device: "phone", token: try await issuer.es256Token(TokenIssuer.claims(user: "alice")))
            #expect(created.status == .created, "\(created.text)")
            let shared = try await client.register(user: "alice", device: "tablet", token: try await issuer.hs256Token(TokenIssuer.claims(user: "alice")))
            #expect(shared.status == .created, "\(shared.text)")
            let shown = try await client.admin(.get, "/v1/admin/user-identity").decode(UserIdentityResponse.self).configuration
            #expect(shown?.jwks == issuer.jwks() && shown?.hs256SecretSet == true && shown?.required == true)
        }
        let stored = try await store.userIdentity(applicationId: fixture.applicationId)
        #expect(stored?.hs256Secret == issuer.secret && stored?.issuer == TokenIssuer.issuer && stored?.audience == TokenIssuer.audience)
        #expect(try await store.deleteUserIdentity(applicationId: fixture.applicationId))
        #expect(try await store.userIdentity(applicationId: fixture.applicationId) == nil)
    }

    /// A token with a `jti` registers one device for its lifetime (issue 49: one ES256 token
    /// registered five); a retry of that registration passes; a token naming its device
    /// (`deviceId`) registers that device only.
    @Test(arguments: StoreKind.allCases)
    func aTokenRegistersOneDeviceOnEveryStore(_ kind: StoreKind) async throws {
        let (store, fixture) = try await Self.fixture(on: kind)
        let issuer = TokenIssuer()
        try await fixture.test { client in
            #expect(try await client.setUserIdentity(issuer.configuration(withSecret: true)).status == .ok)
            var claims = TokenIssuer.claims(user: "alice")
            claims.jti = IDClaim(value: "token-1")
            let token = try await issuer.es256Token(claims)
            #expect(try await client.register(user: "alice", device: "phone", token: token).status == .created)
            let retried = try await client.register(user: "alice", device: "phone", token: token)
            #expect(retried.status == .ok, "the same registration again is a retry: \(retried.text)")
            let replayed = try await client.register(user: "alice", device: "tablet", token: token)
            #expect(replayed.status == .unauthorized && replayed.errorCode == .userTokenInvalid, "\(replayed.text)")
            #expect(replayed.errorDetails?["reason"] == .string("reused"))
            // The same id signed with the shared secret is the same token id of the same application.
            #expect(try await client.register(user: "alice", device: "laptop", token: try await issuer.hs256Token(claims)).errorCode == .userTokenInvalid)

            var named = TokenIssuer.claims(user: "alice")
            named.deviceId = "tv"
            let forTheTV = try await issuer.es256Token(named)
            let elsewhere = try await client.register(user: "alice", device: "console", token: forTheTV)
            #expect(elsewhere.errorCode == .userTokenMismatch && elsewhere.errorDetails?["field"] == .string("deviceId"), "\(elsewhere.text)")
            #expect(try await client.register(user: "alice", device: "tv", token: forTheTV).status == .created)
        }
        // A binding lasts as long as its token, and is forgotten after.
        let now = Date()
        #expect(try await store.bindUserToken(applicationId: fixture.applicationId, tokenId: "t", deviceId: "a", expiresAt: now + 10, now: now) == "a")
        #expect(try await store.bindUserToken(applicationId: fixture.applicationId, tokenId: "t", deviceId: "b", expiresAt: now + 10, now: now) == "a")
        #expect(try await store.bindUserToken(applicationId: fixture.applicationId, tokenId: "t", deviceId: "b", expiresAt: now + 30, now: now + 20) == "b")
        // Kept, not merely answered: the id now belongs to "b" until its new end.
        #expect(try await store.bindUserToken(applicationId: fixture.applicationId, tokenId: "t", deviceId: "c", expiresAt: now + 30, now: now + 21) == "b")
    }
}
