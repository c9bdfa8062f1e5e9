@testable import Backplane
import Foundation
import BackplaneWire
import Testing

/// Tokens and the last use of credentials, on every store.
extension StoreConformanceTests {
    @Test(arguments: StoreKind.allCases)
    func tokensListInOrderRevokeOnceAndKeepTheirNewestUse(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        let other = try await application(in: store)
        let applications = ApplicationService(store: store)
        let first = try await applications.issueToken(
            applicationId: applicationId, scope: .reporting, name: "first", expiresAt: Self.now.addingTimeInterval(3600), now: Self.now)
        let second = try await applications.issueToken(
            applicationId: applicationId, scope: .cms, name: "second", now: Self.now.addingTimeInterval(1))
        _ = try await applications.issueToken(applicationId: other, scope: .admin, name: "elsewhere", now: Self.now)

        var listed = try await store.tokens(applicationId: applicationId)
        #expect(listed.map(\.id) == [first.info.tokenId, second.info.tokenId])
        #expect(listed.first?.expiresAt == Self.now.addingTimeInterval(3600))
        #expect(listed.allSatisfy { $0.lastUsedAt == nil && $0.revokedAt == nil })

        let revokedAt = Self.now.addingTimeInterval(10)
        let revoked = try await store.revokeToken(applicationId: applicationId, tokenId: first.info.tokenId, at: revokedAt)
        #expect(revoked?.revokedAt == revokedAt)
        // A second revocation keeps the first time; another application's token is not found.
        let again = try await store.revokeToken(applicationId: applicationId, tokenId: first.info.tokenId, at: revokedAt + 5)
        #expect(again?.revokedAt == revokedAt)
        let elsewhere = try await store.revokeToken(applicationId: other, tokenId: second.info.tokenId, at: revokedAt)
        #expect(elsewhere == nil)

        let keyId = try #require(try await store.appKeys(applicationId: applicationId).first?.keyId)
        let used = Self.now.addingTimeInterval(100)
        try await store.recordCredentialUse(keys: [keyId: used], tokens: [second.info.tokenId: used])
        // An older time (a batch written late) never replaces a newer one.
        try await store.recordCredentialUse(keys: [keyId: used - 50], tokens: [second.info.tokenId: used - 50])
        let key = try await store.appKey(id: keyId)
        #expect(key?.lastUsedAt == used)
        listed = try await store.tokens(applicationId: applicationId)
        #expect(listed.last?.lastUsedAt == used)
        #expect(listed.first?.lastUsedAt == nil)
    }
}
