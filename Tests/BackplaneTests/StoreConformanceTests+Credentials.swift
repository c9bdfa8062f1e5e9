@testable import Backplane
import Foundation
import BackplaneWire
import Testing

/// Tokens, the last use of credentials, and nonces recorded inside other writes, on every store.
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

    /// A sync's command write records its request's nonce: the same nonce again is refused with
    /// `NonceReusedError`, and the refused write delivers nothing.
    @Test(arguments: StoreKind.allCases)
    func aSyncWriteRecordsItsNonceAndARefusedReplayChangesNothing(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        try await registered(store, applicationId, "phone")
        let keyId = try #require(try await store.appKeys(applicationId: applicationId).first?.keyId)
        let nonce = SignedRequestRecord(keyId: keyId, nonce: "sync-write-nonce-01", signedAt: Self.now, receivedAt: Self.now)
        let rules = CommandSyncRules(
            applyAck: { _, _ in fatalError("no acks are sent") },
            deliver: { command in
                var delivered = command
                delivered.state = .delivered
                return delivered
            },
            detach: { $0 }, now: Self.now)
        // Nothing open: the write is made for the nonce alone.
        let first = try await store.syncCommands(applicationId: applicationId, deviceId: "phone", acks: [], rules: rules, signedRequest: nonce)
        #expect(first.open.isEmpty)

        _ = try await store.insertCommands([CommandRecord(
            commandId: "c1", applicationId: applicationId, deviceId: "phone", type: .wipe, assetIds: nil, state: .pending,
            createdAt: Self.now, updatedAt: Self.now, deferrals: 0)])
        await #expect(throws: NonceReusedError.self) {
            _ = try await store.syncCommands(applicationId: applicationId, deviceId: "phone", acks: [], rules: rules, signedRequest: nonce)
        }
        #expect(try await store.command(applicationId: applicationId, commandId: "c1")?.state == .pending)
        #expect(try await store.recordSignedRequest(nonce) == false)
    }
}
