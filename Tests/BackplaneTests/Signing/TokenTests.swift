import Backplane
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// Token management through the admin API: narrower tokens, expiry, revocation at once, last use.
@Suite struct TokenTests {
    @Test func anAdminMakesAReportingTokenThatWorksUntilRevokedAndShowsItsUse() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let created = try await client.admin(.post, "/v1/admin/tokens", json: CreateTokenRequest(scope: .reporting, name: "dashboards"))
            #expect(created.status == .created)
            let token = try created.decode(CreatedToken.self)
            #expect(token.token.hasPrefix("bpt_") && token.info.scope == .reporting && token.info.lastUsedAt == nil)

            #expect(try await client.admin(.get, "/v1/reports/events", token: token.token).status == .ok)
            #expect(try await client.admin(.get, "/v1/admin/settings", token: token.token).status == .forbidden)

            let listed = try await client.admin(.get, "/v1/admin/tokens").decode(TokenList.self)
            let entry = try #require(listed.tokens.first { $0.tokenId == token.info.tokenId })
            #expect(entry.lastUsedAt != nil, "the report request was not noted")
            #expect(entry.revokedAt == nil)
            let listing = try await client.admin(.get, "/v1/admin/tokens").text
            #expect(!listing.contains(token.token), "a listing showed a token")

            let revoked = try await client.admin(.post, "/v1/admin/tokens/\(token.info.tokenId)/revoke")
            #expect(revoked.status == .ok)
            #expect(try revoked.decode(TokenInfo.self).revokedAt != nil)
            let refused = try await client.admin(.get, "/v1/reports/events", token: token.token)
            #expect(refused.status == .unauthorized)
            #expect(refused.errorCode == .invalidCredentials)
            let after = try await client.admin(.get, "/v1/admin/tokens").decode(TokenList.self)
            #expect(after.tokens.first { $0.tokenId == token.info.tokenId }?.revokedAt != nil)

            // The admin's own token keeps working, and its use shows too.
            #expect(after.tokens.contains { $0.scope == .admin && $0.lastUsedAt != nil })
        }
    }

    @Test func anExpiredTokenIsRefusedFromItsExpiryOn() async throws {
        let clock = TestClock()
        let fixture = try await Fixture.make(clock: clock)
        try await fixture.test { client in
            let expiresAt = Date().addingTimeInterval(600)
            let created = try await client.admin(
                .post, "/v1/admin/tokens", json: CreateTokenRequest(scope: .cms, name: "import job", expiresAt: expiresAt))
            let token = try created.decode(CreatedToken.self)
            #expect(try await client.admin(.get, "/v1/cms/feeds", token: token.token).status == .ok)
            // To just past the expiry, however long the test took so far.
            clock.advance(by: expiresAt.timeIntervalSince(clock.now) + 1)
            let refused = try await client.admin(.get, "/v1/cms/feeds", token: token.token)
            #expect(refused.status == .unauthorized)
            #expect(refused.text.contains("expired"))
        }
    }

    @Test func theApiMakesNoAdminTokensAndRefusesBadRequests() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let admin = try await client.admin(.post, "/v1/admin/tokens", json: CreateTokenRequest(scope: .admin, name: "more power"))
            #expect(admin.status == .forbidden)
            let past = try await client.admin(
                .post, "/v1/admin/tokens", json: CreateTokenRequest(scope: .cms, name: "x", expiresAt: Date().addingTimeInterval(-1)))
            #expect(past.status == .badRequest && past.errorCode == .validationFailed)
            let tooFar = try await client.admin(
                .post, "/v1/admin/tokens", json: CreateTokenRequest(scope: .cms, name: "x", expiresAt: Date().addingTimeInterval(11 * 365 * 86400)))
            #expect(tooFar.status == .badRequest)
            let unnamed = try await client.admin(.post, "/v1/admin/tokens", json: CreateTokenRequest(scope: .cms, name: ""))
            #expect(unnamed.status == .badRequest)
            #expect(try await client.admin(.post, "/v1/admin/tokens/tok_nope/revoke").status == .notFound)
            let listed = try await client.admin(.get, "/v1/admin/tokens").decode(TokenList.self)
            #expect(listed.tokens.count == 1, "a refused request created a token")

            // A reporting token cannot manage tokens.
            let reporting = try await fixture.services.applications.createToken(
                applicationId: fixture.applicationId, scope: .reporting, name: "r")
            #expect(try await client.admin(.get, "/v1/admin/tokens", token: reporting).status == .forbidden)
        }
    }

    @Test func appKeysShowTheirLastUse() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let before = try await client.admin(.get, "/v1/admin/keys").decode(AppKeyList.self)
            #expect(before.keys.first?.lastUsedAt == nil)
            try await client.register(user: "alice", device: "phone")
            let after = try await client.admin(.get, "/v1/admin/keys").decode(AppKeyList.self)
            #expect(after.keys.first { $0.keyId == fixture.signer.keyId }?.lastUsedAt != nil)
            // Written with the last-seen batch: a server started on the same data sees it.
            try await fixture.services.credentialUse.flush(to: fixture.services.store)
            let reopened = try fixture.restarted()
            #expect(try await reopened.services.applications.appKeys(applicationId: fixture.applicationId).first?.lastUsedAt != nil)
        }
    }
}
