import Crypto
import Foundation
import BackplaneWire

/// ClearKey licenses through the backplane, the engine's own `LicenseProvider`: asks the
/// license door with the device's signed session, keeps each answer as it came (the keys wrapped
/// for the device's agreement key, so never at rest in the clear), unwraps the keys only to hand
/// them to a player, and queues a release for every deleted asset's license, sent until the
/// backplane acknowledges it.
actor BackplaneLicenses: LicenseProvider {
    private let session: DeviceSession
    private let database: SDKDatabase
    private let agreementKey: P256.KeyAgreement.PrivateKey
    /// Asks the engine for a sync, where licenses are renewed.
    private let requestSync: @Sendable () -> Void
    /// The credentials the agreement key was registered under (again after a new registration).
    private var agreementKeySentAs: String?

    init(
        session: DeviceSession, database: SDKDatabase, agreementKey: P256.KeyAgreement.PrivateKey, requestSync: @escaping @Sendable () -> Void
    ) {
        self.session = session
        self.database = database
        self.agreementKey = agreementKey
        self.requestSync = requestSync
    }

    func acquireLicense(for asset: LicenseRequest) async throws -> LicenseState {
        let kids = ClearKeyContent.keyIds(of: asset)
        guard !kids.isEmpty else { return .notRequired }
        let answer = try await ask(assetId: asset.assetId, kids: kids, grantId: asset.grantId)
        try database.saveBackplaneLicense(answer, assetId: asset.assetId)
        return .acquired(until: answer.expiresAt)
    }

    /// Licenses are renewed at each sync (`SyncRequest.licenses`), which the backplane answers
    /// with a new end or ends them: the sweep's call near a license's end asks for a sync and
    /// answers the end the license has now (nil when the asset holds none of the backplane's).
    func renewLicense(for asset: LicenseRequest) async throws -> Date? {
        guard let held = try database.backplaneLicense(assetId: asset.assetId) else { return nil }
        requestSync()
        return held.expiresAt
    }

    /// The deletion queued the release already, in its transaction (`SDKDatabase.deleteAssets`);
    /// queueing again is for a caller that did not.
    func releaseLicense(assetId: String) async {
        _ = try? database.queueLicenseRelease(assetId: assetId, at: Date())
        await sendReleases()
    }

    /// Sends the queued releases, oldest first, until one cannot be sent (offline, 5xx): the
    /// rest wait for the next sync. An answer of 404 (a license the backplane does not know) is
    /// as final as a release.
    func sendReleases() async {
        try? database.queueOrphanedLicenseReleases(at: Date())
        guard let pending = try? database.pendingLicenseReleases() else { return }
        for (licenseId, kids) in pending {
            do {
                _ = try await session.request { api, credentials in
                    try await api.releaseLicense(licenseId, LicenseReleaseRequest(kids: kids.isEmpty ? nil : kids), as: credentials)
                }
            } catch let error as BackplaneClientError where error.code == .notFound {
            } catch let error as BackplaneClientError where error.code == .licenseServerFailed {
                // One application's license server failing: this release waits, the others go.
                continue
            } catch {
                return
            }
            try? database.forgetLicenseRelease(licenseId)
        }
    }

    /// Whether the asset holds a license of the backplane's (its media opens only with its keys).
    /// Only ClearKey's: its keys reach a player through the playback server's door alone. A
    /// license exchanged for another system may sit in a CDM that would go on playing.
    func holdsLicense(assetId: String) -> Bool {
        (try? database.backplaneLicense(assetId: assetId))?.clearKey != nil
    }

    /// The asset's keys in the clear, for a player (only the key ids asked for, when any): empty
    /// when the asset holds no license. Throws when its keys do not open (another agreement key).
    func clearKeys(assetId: String, kids: [Data]?) throws -> [(kid: Data, key: Data)] {
        guard let held = try database.backplaneLicense(assetId: assetId), let wrapped = held.clearKey,
              let epk = Base64URL.decode(wrapped.epk), wrapped.alg == ClearKeyLicense.algorithm
        else { return [] }
        let wrapping = try agreementKey.sharedSecretFromKeyAgreement(with: try P256.KeyAgreement.PublicKey(x963Representation: epk))
            .hkdfDerivedSymmetricKey(
                using: SHA256.self, salt: Data(held.licenseId.utf8), sharedInfo: Data(ClearKeyLicense.wrappingInfo.utf8) + epk,
                outputByteCount: 32)
        var keys: [(kid: Data, key: Data)] = []
        for entry in wrapped.keys {
            guard let kid = Base64URL.decode(entry.kid), kids?.contains(kid) ?? true, let box = Base64URL.decode(entry.k) else { continue }
            keys.append((kid, try AES.GCM.open(try AES.GCM.SealedBox(combined: box), using: wrapping, authenticating: kid)))
        }
        return keys
    }

    /// Another system's license through the door: the CDM's challenge out, the license server's
    /// answer back, and the license kept (its id and end, not its bytes' meaning) so that syncs
    /// renew it and the asset's deletion releases it.
    func exchange(assetId: String, system: LicenseSystem, challenge: Data) async throws -> LicenseIssueResponse {
        guard system != .clearKey else {
            throw BackplaneClientError(kind: .invalidInput, message: "ClearKey licenses are the SDK's own; exchange is for the other systems.")
        }
        guard (1...WireLimits.maxLicenseChallengeBytes).contains(challenge.count) else {
            throw BackplaneClientError(kind: .invalidInput, message: "A challenge is 1 to \(WireLimits.maxLicenseChallengeBytes) bytes.")
        }
        // Kept with an asset the SDK holds: one it does not would be released as orphaned at once.
        guard try database.holdsAsset(assetId) else {
            throw BackplaneClientError(kind: .invalidInput, message: "Asset '\(assetId)' is not queued or downloaded on this device.")
        }
        let request = LicenseIssueRequest(
            assetId: assetId, system: system, request: .opaque(challenge), grantId: try database.heldGrantId(assetId: assetId))
        let answer = try await session.request { api, credentials in try await api.requestLicense(request, as: credentials) }
        // Another license of the asset is given up: its release is queued, not forgotten.
        if let held = try database.backplaneLicense(assetId: assetId), held.licenseId != answer.licenseId {
            try database.queueLicenseRelease(assetId: assetId, at: Date())
            Task { await sendReleases() }
        }
        try database.saveBackplaneLicense(answer, assetId: assetId)
        return answer
    }

    /// Sends the release of an exchanged license now, with the CDM's release message; the
    /// license server's answer, for the CDM (nil when it sent none). The license is released for
    /// good, held or not any more: the release queued when its asset was deleted is the same
    /// release, and the backplane forwards each one it is sent.
    func release(licenseId: String, message: Data?) async throws -> Data? {
        try database.queueLicenseRelease(licenseId: licenseId, at: Date())
        let request = LicenseReleaseRequest(message: message?.base64EncodedString())
        let answer = try await session.request { api, credentials in try await api.releaseLicense(licenseId, request, as: credentials) }
        try database.forgetLicenseRelease(licenseId)
        return answer.licenseServerAnswer.flatMap { Data(base64Encoded: $0) }
    }

    private func ask(assetId: String, kids: [Data], grantId: String?) async throws -> LicenseIssueResponse {
        let request = LicenseIssueRequest(
            assetId: assetId, system: .clearKey, request: ClearKeyRequest(kids: kids.map { Base64URL.encode($0) }, type: "persistent-license"),
            grantId: grantId)
        return try await session.request { [agreementKey] api, credentials in
            if await self.agreementKeySentAs != credentials.credential {
                try await api.setAgreementKey(
                    AgreementKeyRequest(publicKey: Base64URL.encode(agreementKey.publicKey.x963Representation)), as: credentials)
                await self.agreementKeySent(as: credentials.credential)
            }
            return try await api.requestLicense(request, as: credentials)
        }
    }

    private func agreementKeySent(as credential: String) {
        agreementKeySentAs = credential
    }
}

extension BackplaneLicenses {
    /// The device's agreement key, kept owner-only in `agreement-key` in the data directory and
    /// made on first use. Apart from the device key: it only ever opens licenses.
    static func agreementKey(in directory: URL) throws -> P256.KeyAgreement.PrivateKey {
        let file = directory.appendingPathComponent("agreement-key")
        if let data = try? Data(contentsOf: file), let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: data) { return key }
        let key = P256.KeyAgreement.PrivateKey()
        try FileDeviceIdentityStore.writeOwnerOnly(key.rawRepresentation, to: file)
        return key
    }
}
