@testable import Backplane
import Crypto
import Foundation
import BackplaneWire
import Testing

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

/// The license door over every store: the permission's rules in the door's transaction, a
/// release ending the grant, the list joined with the grants' states.
extension StoreConformanceTests {
    @Test(arguments: StoreKind.allCases)
    func licensesAreIssuedUnderTheDownloadRulesAndReleasedWithTheirGrant(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let app = try await application(in: store)
        let applications = ApplicationService(store: store, wakeUps: WakeUpHub())
        _ = try await applications.updateSettings(applicationId: app, ApplicationSettingsUpdate { $0.maxCopiesPerAccount = 1 })
        let keys = ContentKeyService(store: store, sealing: KeyEncryptionKey.generate(), now: { Self.now })
        let licenses = LicenseService(
            store: store, contentKeys: keys, licenseServers: LicenseServerService(store: store), entitlements: Entitlements(store: store),
            now: { Self.now })
        let kid = "0123456789abcdef0123456789abcdef", key = "00112233445566778899aabbccddeeff"
        _ = try await keys.set(applicationId: app, assetId: "film", ContentKeysRequest(keys: [.init(kid: kid, key: key)]))
        try await registered(store, app, "phone")
        try await registered(store, app, "tablet")
        let agreement = P256.KeyAgreement.PrivateKey()
        for device in ["phone", "tablet"] {
            try await licenses.setAgreementKey(
                applicationId: app, deviceId: device, AgreementKeyRequest(publicKey: Base64URL.encode(agreement.publicKey.x963Representation)))
        }
        await #expect(throws: ServiceError.self) {
            try await licenses.setAgreementKey(
                applicationId: app, deviceId: "nobody", AgreementKeyRequest(publicKey: Base64URL.encode(agreement.publicKey.x963Representation)))
        }
        let ask = LicenseIssueRequest(assetId: "film", system: .clearKey, request: ClearKeyRequest(kids: [Base64URL.encode(HexKey.bytes(kid)!)]))

        let (first, created) = try await licenses.issue(applicationId: app, deviceId: "phone", ask)
        #expect(created && first.clearKey?.keys.count == 1)
        var again = ask
        again.grantId = first.grantId
        let (second, createdAgain) = try await licenses.issue(applicationId: app, deviceId: "phone", again)
        // Asking again counts once: the same grant and license, the keys wrapped anew.
        #expect(!createdAgain && second.grantId == first.grantId && second.licenseId == first.licenseId)
        #expect(second.clearKey?.epk != first.clearKey?.epk)
        do {
            _ = try await licenses.issue(applicationId: app, deviceId: "tablet", ask)
            Issue.record("a second copy was licensed")
        } catch let error as ServiceError {
            #expect(error.code == .downloadLimitReached)
        }

        // A sync's renewal: the device's licenses renewed in the order reported, another's unknown.
        let renewals = try await licenses.renew(applicationId: app, deviceId: "phone", [
            HeldLicense(licenseId: "lic_nobody"), HeldLicense(licenseId: first.licenseId),
        ])
        #expect(renewals.map(\.licenseId) == ["lic_nobody", first.licenseId])
        #expect(renewals.map(\.status) == [.ended, .renewed] && renewals[0].reason == .unknownLicense)
        #expect(try await licenses.list(applicationId: app, deviceId: "phone", limit: nil).licenses.allSatisfy { $0.renewedAt == Self.now })
        #expect(try await licenses.renew(applicationId: app, deviceId: "tablet", [HeldLicense(licenseId: first.licenseId)]).first?.reason
            == .unknownLicense)

        let releasing = try await licenses.release(applicationId: app, deviceId: "phone", licenseId: first.licenseId, LicenseReleaseRequest())
        #expect(releasing.licenseServerAnswer == nil, "ClearKey's releases go nowhere else")
        let released = releasing.license
        #expect(released.state == "released" && released.releasedAt == Self.now)
        let afterRelease = try await licenses.renew(applicationId: app, deviceId: "phone", [HeldLicense(licenseId: first.licenseId)])
        #expect(afterRelease.first?.status == .ended && afterRelease.first?.reason == .grantEnded)
        #expect(try await store.downloadGrant(applicationId: app, grantId: first.grantId)?.state == .deleted)
        await #expect(throws: ServiceError.self) {
            try await licenses.release(applicationId: app, deviceId: "tablet", licenseId: second.licenseId, LicenseReleaseRequest())
        }
        let listed = try await licenses.list(applicationId: app, deviceId: "phone", limit: nil).licenses
        #expect(listed.map(\.licenseId) == [first.licenseId] && listed.allSatisfy { $0.state == "released" })
        #expect(listed.first?.kids == [kid])
        // Released, the grant opens no license again.
        await #expect(throws: ServiceError.self) { try await licenses.issue(applicationId: app, deviceId: "phone", again) }
        let (third, _) = try await licenses.issue(applicationId: app, deviceId: "tablet", ask)
        #expect(try await licenses.list(applicationId: app, deviceId: "tablet", limit: nil).licenses.map(\.licenseId) == [third.licenseId])
    }

    @Test(arguments: StoreKind.allCases)
    func licenseServersAreSetReplacedListedAndRemoved(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let app = try await application(in: store)
        let other = try await application(in: store)
        let servers = LicenseServerService(store: store, allowed: true, now: { Self.now })
        _ = try await servers.set(applicationId: app, system: "widevine", LicenseServerRequest(url: "https://wv.example/license"))
        let set = try await servers.set(
            applicationId: app, system: "widevine", LicenseServerRequest(url: "https://wv2.example/license", headers: ["X-Api-Key": "s3cret"]))
        _ = try await servers.set(applicationId: app, system: "fairplay", LicenseServerRequest(url: "https://10.0.0.7:8443/ckc"))
        #expect(set.headerNames == ["X-Api-Key"] && set.updatedAt == Self.now)
        let listed = try await servers.list(applicationId: app).licenseServers
        #expect(listed.map(\.system) == [.fairPlay, .widevine] && listed.last?.url == "https://wv2.example/license")
        // The values are kept for the forwards, never shown.
        #expect(try await store.licenseServers(applicationId: app).last?.headers == ["X-Api-Key": "s3cret"])
        #expect(try await servers.list(applicationId: other).licenseServers.isEmpty)
        try await servers.delete(applicationId: app, system: "fairplay")
        #expect(try await servers.list(applicationId: app).licenseServers.map(\.system) == [.widevine])
        await #expect(throws: ServiceError.self) { try await servers.delete(applicationId: app, system: "fairplay") }
    }
}
