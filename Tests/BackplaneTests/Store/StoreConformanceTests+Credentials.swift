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

    /// A sync spends its request's nonce, whether it changes nothing (a read) or writes: the same
    /// nonce again is refused with `NonceReusedError`, and the refused sync delivers nothing.
    @Test(arguments: StoreKind.allCases)
    func aSyncSpendsItsNonceAndARefusedReplayChangesNothing(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        try await registered(store, applicationId, "phone")
        let keyId = try #require(try await store.appKeys(applicationId: applicationId).first?.keyId)
        let nonce = SignedRequestRecord(keyId: keyId, nonce: "sync-write-nonce-01", signedAt: Self.now, receivedAt: Self.now)
        // Delivers whatever is open, from sign-in's read as a device's request makes it.
        func delivering() async throws -> SyncPlan {
            let (device, open) = try #require(try await store.deviceWithOpenCommands(applicationId: applicationId, deviceId: "phone"))
            return SyncPlan(
                applicationId: applicationId, deviceId: "phone", signedIn: SyncSnapshot(device: device, openCommands: open),
                reportedGrantIds: [], ackedCommandIds: []
            ) { read in
                var decision = SyncDecision(deviceAfter: read.device, releasedAt: Self.now)
                decision.commands = read.openCommands.map { command in
                    var delivered = command
                    delivered.state = .delivered
                    return delivered
                }
                decision.openCommands = decision.commands
                return decision
            }
        }
        // Nothing open: nothing to write, and the nonce is spent all the same.
        let first = try await store.sync(try await delivering(), spending: nonce)
        #expect(first.openCommands.isEmpty)

        _ = try await store.insertCommands([CommandRecord(
            commandId: "c1", applicationId: applicationId, deviceId: "phone", type: .wipe, assetIds: nil, state: .pending,
            createdAt: Self.now, updatedAt: Self.now, deferrals: 0)])
        let replay = try await delivering()
        await #expect(throws: NonceReusedError.self) { _ = try await store.sync(replay, spending: nonce) }
        #expect(try await store.command(applicationId: applicationId, commandId: "c1")?.state == .pending)
        #expect(try await store.recordSignedRequest(nonce) == false)

        // A sync that writes spends its nonce in its write.
        let second = SignedRequestRecord(keyId: keyId, nonce: "sync-write-nonce-02", signedAt: Self.now, receivedAt: Self.now)
        #expect(try await store.sync(try await delivering(), spending: second).openCommands.map(\.commandId) == ["c1"])
        #expect(try await store.command(applicationId: applicationId, commandId: "c1")?.state == .delivered)
        #expect(try await store.recordSignedRequest(second) == false)
    }
}
