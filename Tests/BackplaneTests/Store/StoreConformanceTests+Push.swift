@testable import Backplane
import Foundation
import BackplaneWire
import Testing

/// Push credentials and the per-device push claim, on every store.
extension StoreConformanceTests {
    @Test(arguments: StoreKind.allCases)
    func pushCredentialsAreKeptPerProviderAndMarkedBrokenOnlyAsSet(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        let apns = PushCredentialsRecord(applicationId: applicationId, provider: .apns, secret: #"{"k":"apns"}"#, setAt: Self.now)
        let fcm = PushCredentialsRecord(applicationId: applicationId, provider: .fcm, secret: #"{"k":"fcm"}"#, setAt: Self.now)
        try await store.setPushCredentials(apns)
        try await store.setPushCredentials(fcm)
        #expect(try await store.pushCredentials(applicationId: applicationId) == [apns, fcm])

        let broken = PushCredentialsBroken(since: Self.now.addingTimeInterval(5), reason: "InvalidProviderToken")
        // A refusal of credentials replaced since does not mark the new ones.
        #expect(try await !store.markPushCredentialsBroken(applicationId: applicationId, provider: .apns, setAt: Self.now - 1, broken: broken))
        #expect(try await store.markPushCredentialsBroken(applicationId: applicationId, provider: .apns, setAt: Self.now, broken: broken))
        #expect(try await store.pushCredentials(applicationId: applicationId).first?.broken == broken)
        // Setting them again clears the mark.
        var replaced = apns
        replaced.setAt = Self.now.addingTimeInterval(10)
        try await store.setPushCredentials(replaced)
        #expect(try await store.pushCredentials(applicationId: applicationId) == [replaced, fcm])
        #expect(try await store.deletePushCredentials(applicationId: applicationId, provider: .apns))
        #expect(try await !store.deletePushCredentials(applicationId: applicationId, provider: .apns))
        #expect(try await store.pushCredentials(applicationId: applicationId) == [fcm])
    }

    @Test(arguments: StoreKind.allCases)
    func oneClaimPerDeviceWithinTheSpacingEvenAtOnce(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        #expect(try await store.claimPush(applicationId: applicationId, deviceId: "phone", now: Self.now, spacing: .seconds(30)) == .granted)
        let soon = Self.now.addingTimeInterval(29)
        #expect(try await store.claimPush(applicationId: applicationId, deviceId: "phone", now: soon, spacing: .seconds(30))
            == .refused(lastPushAt: Self.now))
        // Another device has its own spacing.
        #expect(try await store.claimPush(applicationId: applicationId, deviceId: "tablet", now: soon, spacing: .seconds(30)) == .granted)
        // Sixteen claims at once, once the spacing is over: one is granted.
        let later = Self.now.addingTimeInterval(30)
        let granted = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<16 {
                group.addTask { try await store.claimPush(applicationId: applicationId, deviceId: "phone", now: later, spacing: .seconds(30)) == .granted }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(granted == 1)
    }
}

/// Content keys, on every store.
extension StoreConformanceTests {
    private func contentKey(_ applicationId: String, _ assetId: String, _ kid: String, at offset: TimeInterval = 0) -> ContentKeyRecord {
        ContentKeyRecord(
            applicationId: applicationId, assetId: assetId, kid: kid, sealedKey: Data(kid.utf8), sealedWith: "kek",
            createdAt: Self.now.addingTimeInterval(offset))
    }

    @Test(arguments: StoreKind.allCases)
    func contentKeysAreSetAddedAndOneKeyIdOpensOneAsset(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let app = try await application(in: store)
        let a = contentKey(app, "film", "aa", at: 0), b = contentKey(app, "film", "bb", at: 1)
        #expect(try await store.setContentKeys(applicationId: app, assetId: "film", keys: [a, b], replacing: true, limit: 3) == .set)
        #expect(try await store.contentKeys(applicationId: app, assetId: "film") == [a, b])
        // Another asset cannot take a key id; nothing changes.
        let c = contentKey(app, "trailer", "cc")
        #expect(try await store.setContentKeys(
            applicationId: app, assetId: "trailer", keys: [c, contentKey(app, "trailer", "bb")], replacing: true, limit: 3)
            == .kidTaken(kid: "bb", assetId: "film"))
        #expect(try await store.contentKeys(applicationId: app, assetId: "trailer").isEmpty)
        // Adding counts what the asset keeps (a key id given again replaces its key).
        let d = contentKey(app, "film", "dd", at: 2), e = contentKey(app, "film", "ee", at: 3)
        #expect(try await store.setContentKeys(applicationId: app, assetId: "film", keys: [d, e], replacing: false, limit: 3) == .tooMany(held: 2))
        var newB = contentKey(app, "film", "bb", at: 4)
        newB.sealedKey = Data("new".utf8)
        #expect(try await store.setContentKeys(applicationId: app, assetId: "film", keys: [d], replacing: false, limit: 3) == .set)
        #expect(try await store.setContentKeys(applicationId: app, assetId: "film", keys: [newB], replacing: false, limit: 3) == .set)
        #expect(try await store.contentKeys(applicationId: app, assetId: "film") == [a, d, newB])
        // Replacing drops those not given; the freed key id may then open another asset.
        #expect(try await store.setContentKeys(applicationId: app, assetId: "film", keys: [a], replacing: true, limit: 3) == .set)
        #expect(try await store.setContentKeys(applicationId: app, assetId: "trailer", keys: [c, contentKey(app, "trailer", "bb")], replacing: true, limit: 3) == .set)
        #expect(try await store.contentKeys(applicationId: app, assetId: "film") == [a])
        #expect(try await store.contentKeys(applicationId: app, assetId: "trailer").map(\.kid) == ["bb", "cc"])
        // Another application has its own key ids.
        let other = try await application(in: store)
        #expect(try await store.setContentKeys(applicationId: other, assetId: "x", keys: [contentKey(other, "x", "aa")], replacing: true, limit: 3) == .set)
    }
}
