import Backplane
import Crypto
import Foundation
import HTTPTypes
import BackplaneWire
import Testing

/// The license door through the device API: who gets which keys, under the download rules, and
/// how a release, a wipe and the window end them.
@Suite struct LicenseDoorTests {
    static let filmKid = "0123456789abcdef0123456789abcdef"
    static let filmKey = "00112233445566778899aabbccddeeff"
    static let trailerKid = "fedcba9876543210fedcba9876543210"
    static let trailerKey = "ffeeddccbbaa99887766554433221100"

    static func kid(_ hex: String) -> String { Base64URL.encode(HexKey.bytes(hex)!) }

    static func ask(_ assetId: String, _ kids: [String], grantId: String? = nil) -> LicenseIssueRequest {
        LicenseIssueRequest(assetId: assetId, system: .clearKey, request: ClearKeyRequest(kids: kids.map(kid), type: "persistent-license"), grantId: grantId)
    }

    /// What the SDK does with the answer: ECDH with its agreement key, then each key's box.
    static func unwrap(_ license: ClearKeyLicense, licenseId: String, with key: P256.KeyAgreement.PrivateKey) throws -> [String: String] {
        let epk = try #require(Base64URL.decode(license.epk))
        let wrapping = try key.sharedSecretFromKeyAgreement(with: try P256.KeyAgreement.PublicKey(x963Representation: epk))
            .hkdfDerivedSymmetricKey(using: SHA256.self, salt: Data(licenseId.utf8), sharedInfo: Data(ClearKeyLicense.wrappingInfo.utf8) + epk, outputByteCount: 32)
        var keys: [String: String] = [:]
        for entry in license.keys {
            let kid = try #require(Base64URL.decode(entry.kid))
            let box = try AES.GCM.SealedBox(combined: try #require(Base64URL.decode(entry.k)))
            keys[HexKey.text(kid)] = HexKey.text(try AES.GCM.open(box, using: wrapping, authenticating: kid))
        }
        return keys
    }

    private func setUp(_ client: Client, _ fixture: Fixture) async throws {
        _ = try await fixture.services.applications.updateSettings(
            applicationId: fixture.applicationId, ApplicationSettingsUpdate { $0.maxCopiesPerAccount = 1 })
        for (asset, kid, key) in [("film", Self.filmKid, Self.filmKey), ("trailer", Self.trailerKid, Self.trailerKey)] {
            let set = try await client.admin(.put, "/v1/admin/assets/\(asset)/keys", json: ContentKeysRequest(keys: [.init(kid: kid, key: key)]))
            #expect(set.status == .ok, "\(set.text)")
        }
    }

    private func agree(_ client: Client, _ device: DeviceIdentity) async throws -> P256.KeyAgreement.PrivateKey {
        let key = P256.KeyAgreement.PrivateKey()
        let set = try await client.device(
            .put, "/v1/devices/\(device.deviceId)/agreement-key", json: AgreementKeyRequest(publicKey: Base64URL.encode(key.publicKey.x963Representation)),
            as: device)
        #expect(set.status == .noContent, "\(set.text)")
        return key
    }

    @Test func onlyTheAskingDeviceOpensTheKeysOfItsAssetWithinTheRules() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            try await setUp(client, fixture)
            let phone = try await client.register(user: "ann", device: "phone").0
            let tablet = try await client.register(user: "ann", device: "tablet").0

            // No agreement key yet: nothing to wrap the keys for.
            let early = try await client.device(.post, "/v1/licenses", json: Self.ask("film", [Self.filmKid]), as: phone)
            #expect(early.status == .forbidden && early.errorDetails?["reason"] == .string("noAgreementKey"), "\(early.text)")
            let bad = try await client.device(
                .put, "/v1/devices/phone/agreement-key", json: AgreementKeyRequest(publicKey: Base64URL.encode(Data(repeating: 4, count: 65))), as: phone)
            #expect(bad.status == .badRequest, "\(bad.text)")
            let phoneKey = try await agree(client, phone)
            let tabletKey = try await agree(client, tablet)

            let issued = try await client.device(.post, "/v1/licenses", json: Self.ask("film", [Self.filmKid]), as: phone)
            #expect(issued.status == .created, "\(issued.text)")
            let license = try issued.decode(LicenseIssueResponse.self)
            let clearKey = try #require(license.clearKey)
            #expect(!issued.text.contains(Self.filmKey))
            #expect(try Self.unwrap(clearKey, licenseId: license.licenseId, with: phoneKey) == [Self.filmKid: Self.filmKey])
            // Another device's agreement key does not open it.
            #expect(throws: (any Error).self) { try Self.unwrap(clearKey, licenseId: license.licenseId, with: tabletKey) }
            // The grant is the download permission's: asking for it gives the same grant.
            let permission = try await client.device(.post, "/v1/download-grants", json: DownloadPermissionRequest(assetId: "film"), as: phone)
            #expect(try permission.decode(DownloadPermissionResponse.self).grant.grantId == license.grantId)

            // Asset X's grant does not open asset Y.
            let otherKeys = try await client.device(.post, "/v1/licenses", json: Self.ask("film", [Self.trailerKid]), as: phone)
            #expect(otherKeys.errorDetails?["reason"] == .string("keyNotOfAsset"), "\(otherKeys.text)")
            let otherGrant = try await client.device(
                .post, "/v1/licenses", json: Self.ask("trailer", [Self.trailerKid], grantId: license.grantId), as: phone)
            #expect(otherGrant.errorDetails?["reason"] == .string("grantNotOfAsset"), "\(otherGrant.text)")
            let noKeys = try await client.device(.post, "/v1/licenses", json: Self.ask("poster", [Self.filmKid]), as: phone)
            #expect(noKeys.errorDetails?["reason"] == .string("noContentKeys"), "\(noKeys.text)")

            // One copy per account: the tablet waits for the phone's release.
            let second = try await client.device(.post, "/v1/licenses", json: Self.ask("film", [Self.filmKid]), as: tablet)
            #expect(second.status == .conflict && second.errorDetails?["rule"] == .string("copies"), "\(second.text)")
            let stranger = try await client.device(.post, "/v1/licenses/\(license.licenseId)/release", json: LicenseReleaseRequest(), as: tablet)
            #expect(stranger.status == .notFound, "\(stranger.text)")
            let released = try await client.device(
                .post, "/v1/licenses/\(license.licenseId)/release", json: LicenseReleaseRequest(kids: [Self.kid(Self.filmKid)]), as: phone)
            let releasedLicense = try released.decode(LicenseReleaseResponse.self).license
            #expect(released.status == .ok && releasedLicense.state == "released", "\(released.text)")
            let again = try await client.device(.post, "/v1/licenses/\(license.licenseId)/release", json: LicenseReleaseRequest(), as: phone)
            // A release's answer is a `License`, as a client reading one expects.
            #expect(try again.decode(License.self).releasedAt == releasedLicense.releasedAt)
            let fromTablet = try await client.device(.post, "/v1/licenses", json: Self.ask("film", [Self.filmKid]), as: tablet)
            #expect(fromTablet.status == .created, "\(fromTablet.text)")
            // The released grant opens nothing again.
            let stale = try await client.device(.post, "/v1/licenses", json: Self.ask("film", [Self.filmKid], grantId: license.grantId), as: phone)
            #expect(stale.errorDetails?["reason"] == .string("grantEnded"), "\(stale.text)")

            let listed = try await client.admin(.get, "/v1/admin/devices/phone/licenses").decode(LicenseList.self)
            #expect(listed.licenses.map(\.licenseId) == [license.licenseId] && listed.licenses.first?.state == "released")
            #expect(try await client.admin(.get, "/v1/admin/devices/tablet/licenses").decode(LicenseList.self).licenses.map(\.state) == ["outstanding"])
        }
    }

    @Test func aWipeEndsTheGrantAndItsLicenseAtOnce() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            try await setUp(client, fixture)
            let phone = try await client.register(user: "bo", device: "phone").0
            _ = try await agree(client, phone)
            let license = try await client.device(.post, "/v1/licenses", json: Self.ask("film", [Self.filmKid]), as: phone)
                .decode(LicenseIssueResponse.self)
            // Asking again with the grant counts once: the same grant and license, nothing new.
            let again = try await client.device(.post, "/v1/licenses", json: Self.ask("film", [Self.filmKid], grantId: license.grantId), as: phone)
            let againLicense = try again.decode(LicenseIssueResponse.self)
            #expect(again.status == .ok && againLicense.licenseId == license.licenseId && againLicense.grantId == license.grantId, "\(again.text)")

            let wipe = try await client.admin(.post, "/v1/admin/commands", json: EnqueueCommandRequest(type: .wipe, deviceId: "phone"))
                .decode(CommandList.self)
            let ack = CommandAck(commandId: try #require(wipe.commands.first).commandId, outcome: .succeeded)
            _ = try await client.device(.post, "/v1/sync", json: SyncRequest(acks: [ack]), as: phone)
            let refused = try await client.device(.post, "/v1/licenses", json: Self.ask("film", [Self.filmKid], grantId: license.grantId), as: phone)
            #expect(refused.status == .forbidden && refused.errorDetails?["reason"] == .string("grantEnded"), "\(refused.text)")
            let listed = try await client.admin(.get, "/v1/admin/devices/phone/licenses").decode(LicenseList.self)
            #expect(listed.licenses.count == 1 && listed.licenses.allSatisfy { $0.state == "released" && $0.releasedAt == nil })
        }
    }

    @Test func theLicenseEndsWithTheWindowAndSaysSoInWidevinesNames() async throws {
        let clock = TestClock()
        let fixture = try await Fixture.make(clock: clock)
        try await fixture.test { client in
            try await setUp(client, fixture)
            _ = try await fixture.services.applications.updateSettings(applicationId: fixture.applicationId, ApplicationSettingsUpdate {
                $0.expiryAfterDownloadSeconds = 7 * 86_400; $0.expiryAfterPlaySeconds = 48 * 3_600; $0.offlineViewingPeriodSeconds = 86_400
            })
            let phone = try await client.register(user: "cy", device: "phone").0
            _ = try await agree(client, phone)
            let answer = try await client.device(.post, "/v1/licenses", json: Self.ask("film", [Self.filmKid]), as: phone)
            #expect(answer.text.contains("\"license_duration_seconds\":86400") && answer.text.contains("\"can_persist\":true"), "\(answer.text)")
            let license = try answer.decode(LicenseIssueResponse.self)
            // (The test decoder reads whole seconds.)
            #expect(abs(try #require(license.expiresAt).timeIntervalSince(clock.now.addingTimeInterval(86_400))) < 1)
            #expect(license.policy == LicensePolicy(
                canPersist: true, licenseDurationSeconds: 86_400, rentalDurationSeconds: 7 * 86_400, playbackDurationSeconds: 48 * 3_600,
                renewWithUsage: false, renewalDelaySeconds: 43_200))

            // An asset whose expiry date has passed gets no license.
            let expired = AssetPolicy(publishDate: clock.now.addingTimeInterval(-7200), expiryDate: clock.now.addingTimeInterval(-3600))
            #expect(try await client.admin(.put, "/v1/admin/asset-policies/trailer", json: expired).status == .ok)
            let late = try await client.device(.post, "/v1/licenses", json: Self.ask("trailer", [Self.trailerKid]), as: phone)
            #expect(late.errorDetails?["reason"] == .string("windowOver"), "\(late.text)")
        }
    }

    @Test func aSyncRenewsTheLicensesItReportsAndEndsThoseWhoseGrantEnded() async throws {
        let clock = TestClock()
        let fixture = try await Fixture.make(clock: clock)
        try await fixture.test { client in
            try await setUp(client, fixture)
            _ = try await fixture.services.applications.updateSettings(applicationId: fixture.applicationId, ApplicationSettingsUpdate {
                $0.expiryAfterDownloadSeconds = -1; $0.expiryAfterPlaySeconds = 3_600; $0.offlineViewingPeriodSeconds = 86_400
            })
            let phone = try await client.register(user: "ed", device: "phone").0
            _ = try await agree(client, phone)
            let license = try await client.device(.post, "/v1/licenses", json: Self.ask("film", [Self.filmKid]), as: phone)
                .decode(LicenseIssueResponse.self)

            // A quiet sync carries no license and its answer has no renewals.
            let quiet = try await client.device(.post, "/v1/sync", json: SyncRequest(), as: phone)
            #expect(!quiet.text.contains("licenseRenewals"), "\(quiet.text)")

            // An hour later the license is renewed from then; the first play bounds it.
            clock.advance(by: 3_600)
            let played = clock.now.addingTimeInterval(-1_800)
            let answer = try await client.device(.post, "/v1/sync", json: SyncRequest(licenses: [
                HeldLicense(licenseId: license.licenseId, firstPlayedAt: played), HeldLicense(licenseId: "lic_someone-elses"),
            ]), as: phone, at: clock.now)
            #expect(answer.status == .ok, "\(answer.text)")
            let synced = try answer.decode(SyncResponse.self)
            let renewals = try #require(synced.licenseRenewals)
            #expect(renewals.map(\.status) == [.renewed, .ended] && renewals.last?.reason == .unknownLicense)
            #expect(abs(try #require(renewals.first?.expiresAt).timeIntervalSince(played.addingTimeInterval(3_600))) < 1)
            let listed = try await client.admin(.get, "/v1/admin/devices/phone/licenses").decode(LicenseList.self).licenses
            #expect(listed.first?.renewedAt != nil && listed.first?.expiresAt == renewals.first?.expiresAt)

            // Revoked: once the device acknowledges the deletion, the license ends at its next sync.
            let revoked = try await client.admin(.post, "/v1/admin/download-grants/\(license.grantId)/revoke").decode(RevokedGrant.self)
            _ = try await client.device(.post, "/v1/sync", json: SyncRequest(acks: [CommandAck(commandId: revoked.command.commandId, outcome: .succeeded)]), as: phone, at: clock.now)
            let ended = try await client.device(.post, "/v1/sync", json: SyncRequest(licenses: [HeldLicense(licenseId: license.licenseId)]), as: phone, at: clock.now)
                .decode(SyncResponse.self)
            #expect(ended.licenseRenewals == [LicenseRenewal(licenseId: license.licenseId, status: .ended, reason: .grantEnded)])

            // Too many, or a malformed id: 400, and the sync changes nothing.
            let many = (0...WireLimits.maxLicensesPerSync).map { HeldLicense(licenseId: "lic_\($0)") }
            #expect(try await client.device(.post, "/v1/sync", json: SyncRequest(licenses: many), as: phone, at: clock.now).status == .badRequest)
            #expect(try await client.device(.post, "/v1/sync", json: SyncRequest(licenses: [HeldLicense(licenseId: "")]), as: phone, at: clock.now).status == .badRequest)
        }
    }

    @Test func hostileLicenseRequestsAreRefusedAndWriteNothing() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            try await setUp(client, fixture)
            let phone = try await client.register(user: "di", device: "phone").0
            _ = try await agree(client, phone)
            let cases: [LicenseIssueRequest] = [
                LicenseIssueRequest(assetId: "film", system: .clearKey, request: ClearKeyRequest(kids: [])),
                LicenseIssueRequest(assetId: "film", system: .clearKey, request: ClearKeyRequest(kids: ["not base64!"])),
                LicenseIssueRequest(assetId: "film", system: .clearKey, request: ClearKeyRequest(kids: [Base64URL.encode(Data(count: 15))])),
                LicenseIssueRequest(assetId: "film", system: .clearKey, request: ClearKeyRequest(kids: Array(repeating: Self.kid(Self.filmKid), count: 17))),
                LicenseIssueRequest(assetId: "", system: .clearKey, request: ClearKeyRequest(kids: [Self.kid(Self.filmKid)])),
            ]
            for request in cases {
                let refused = try await client.device(.post, "/v1/licenses", json: request, as: phone)
                #expect(refused.status == .badRequest, "\(refused.text)")
            }
            let widevine = try await client.device(
                .post, "/v1/licenses", json: LicenseIssueRequest(assetId: "film", system: .widevine, request: ClearKeyRequest(kids: [Self.kid(Self.filmKid)])),
                as: phone)
            // Widevine's request is the CDM's challenge, not a ClearKey request (LicenseForwardingTests).
            #expect(widevine.errorDetails?["reason"] == .string("wrongRequestForSystem"), "\(widevine.text)")
            let unknown = try await client.device(
                .post, "/v1/licenses",
                json: LicenseIssueRequest(assetId: "film", system: LicenseSystem(rawValue: "drm9"), request: ClearKeyRequest(kids: [Self.kid(Self.filmKid)])),
                as: phone)
            #expect(unknown.status == .badRequest, "\(unknown.text)")
            #expect(try await client.admin(.get, "/v1/admin/devices/phone/licenses").decode(LicenseList.self).licenses.isEmpty)
            #expect(try await client.admin(.get, "/v1/admin/download-grants?deviceId=phone").decode(DownloadGrantPage.self).grants.isEmpty)
        }
    }
}

/// The console's device page lists the device's licenses: key ids and states, never a key.
@Suite struct LicenseConsoleTests {
    @Test func theDeviceAndAssetPagesShowLicensesAndKeyIdsOnly() async throws {
        let fixture = try await Fixture.make(licenseServers: LicenseServerForwarder.Options(allowed: true))
        try await fixture.test { client in
            let set = try await client.admin(.put, "/v1/admin/assets/film/keys", json: ContentKeysRequest(keys: [
                .init(kid: LicenseDoorTests.filmKid, key: LicenseDoorTests.filmKey),
            ]))
            #expect(set.status == .ok)
            let phone = try await client.register(user: "fay", device: "phone").0
            let key = P256.KeyAgreement.PrivateKey()
            _ = try await client.device(
                .put, "/v1/devices/phone/agreement-key", json: AgreementKeyRequest(publicKey: Base64URL.encode(key.publicKey.x963Representation)),
                as: phone)
            let license = try await client.device(.post, "/v1/licenses", json: LicenseDoorTests.ask("film", [LicenseDoorTests.filmKid]), as: phone)
                .decode(LicenseIssueResponse.self)
            var browser = try #require(try await ConsoleBrowser.signIn(client, token: fixture.adminToken))
            let page = try await browser.get("/console/devices/phone")
            #expect(page.text.contains(license.licenseId) && page.text.contains(LicenseDoorTests.filmKid) && page.text.contains("outstanding"))
            #expect(!page.text.contains(LicenseDoorTests.filmKey))
            _ = try await client.device(.post, "/v1/licenses/\(license.licenseId)/release", json: LicenseReleaseRequest(), as: phone)
            #expect(try await browser.get("/console/devices/phone").text.contains("released "))
            // The asset's page: its key ids, never a key, and the license servers by header name.
            #expect(page.text.contains("href=\"/console/assets/film\""))
            _ = try await client.admin(
                .put, "/v1/admin/license-servers/playready",
                json: LicenseServerRequest(url: "https://pr.example/rightsmanager.asmx", headers: ["X-Secret": "do-not-show"]))
            let asset = try await browser.get("/console/assets/film")
            #expect(asset.text.contains(LicenseDoorTests.filmKid) && !asset.text.contains(LicenseDoorTests.filmKey))
            #expect(asset.text.contains("https://pr.example/rightsmanager.asmx") && asset.text.contains("X-Secret"))
            #expect(!asset.text.contains("do-not-show"))
            #expect(try await browser.get("/console/assets/other").text.contains("No content keys"))
        }
    }
}
