import Crypto
import Foundation
import BackplaneWire

/// The license door: a device asks for an asset's keys; the backplane decides under the download
/// rules, in the transaction that records the grant (or uses the one the device holds) and the
/// license, and answers ClearKey itself with the keys wrapped for that device's agreement key.
/// A release ends the license's grant, so it counts no more against copies and limits.
public struct LicenseService: Sendable {
    let store: any BackplaneStore
    let contentKeys: ContentKeyService
    let now: @Sendable () -> Date

    public init(store: any BackplaneStore, contentKeys: ContentKeyService, now: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.contentKeys = contentKeys
        self.now = now
    }

    /// Records the device's agreement key (400 unless it is a P-256 point).
    public func setAgreementKey(applicationId: String, deviceId: String, _ request: AgreementKeyRequest) async throws {
        guard request.publicKey.utf8.count <= RequestSigning.maxDeviceKeyTextLength,
            let bytes = Base64URL.decode(request.publicKey), (try? P256.KeyAgreement.PublicKey(x963Representation: bytes)) != nil
        else {
            throw ServiceError.validation("'publicKey' must be base64url of an uncompressed X9.63 P-256 point.", field: "publicKey")
        }
        guard try await store.setAgreementKey(applicationId: applicationId, deviceId: deviceId, publicKey: bytes, at: now()) else {
            throw ServiceError(.deviceUnregistered, "Device '\(deviceId)' is not registered.")
        }
    }

    /// What the door decided, inside the transaction.
    private enum Outcome: Sendable {
        /// `recorded`: the license is new and is written; else the held one is answered again.
        case issued(LicenseRecord, grant: DownloadGrantRecord, keys: [(kid: Data, key: Data)], agreementKey: Data, created: Bool, recorded: Bool)
        case denied(LicenseDenial, String)
        case limit(DownloadRule, DownloadCounts)
        case notEnabled
    }

    /// A license for `request.assetId`: 201 with a new grant, 200 with the held one. Refused with
    /// `license_denied` (`details.reason`), `download_limit_reached` or `download_not_enabled`.
    public func issue(
        applicationId: String, deviceId: String, _ request: LicenseIssueRequest
    ) async throws -> (LicenseIssueResponse, created: Bool) {
        try Validate.identifier(request.assetId, field: "assetId")
        if let grantId = request.grantId { try Validate.identifier(grantId, field: "grantId") }
        guard request.system == .clearKey else {
            throw Self.denied(.systemNotConfigured, "No license server is configured for \(request.system.rawValue).")
        }
        let kids = try Self.keyIds(request.request)
        let sealing = try contentKeys.keyEncryptionKey()
        let now = now()
        let licenseId = Secrets.random(prefix: "lic_", byteCount: 12)
        let outcome = try await store.issueLicense(
            applicationId: applicationId, deviceId: deviceId, assetId: request.assetId, grantId: request.grantId
        ) { state -> (LicenseIssue?, Outcome) in
            let decision = try Self.decide(request, kids: kids, state, licenseId: licenseId, sealing: sealing, now: now)
            if case .issued(let license, let grant, _, _, let created, true) = decision {
                return (LicenseIssue(grant: created ? grant : nil, license: license), decision)
            }
            return (nil, decision)
        }
        switch outcome {
        case .issued(let license, let grant, let keys, let agreementKey, let created, _):
            let wrapped = try Self.wrap(keys, for: agreementKey, licenseId: license.licenseId)
            return (LicenseIssueResponse(
                licenseId: license.licenseId, grantId: license.grantId, assetId: license.assetId, system: license.system,
                expiresAt: license.expiresAt, policy: Self.policy(grant.window, expiresAt: license.expiresAt, now: now), clearKey: wrapped), created)
        case .denied(let reason, let message):
            throw Self.denied(reason, message)
        case .limit(let rule, let counts):
            throw ServiceError.downloadLimitReached(rule: rule, counts: counts)
        case .notEnabled:
            throw ServiceError(.downloadNotEnabled, "Device '\(deviceId)' is not download-enabled; enable it (within the device limit) first.")
        }
    }

    /// The door's rules, in order: the asset has keys and those asked are its own; the device can
    /// receive them; the grant named still holds the asset; then the download rules, as a
    /// permission request (the held grant, or a new one within the limits); the window is open.
    private static func decide(
        _ request: LicenseIssueRequest, kids: [Data], _ state: LicenseDoorState, licenseId: String, sealing: KeyEncryptionKey, now: Date
    ) throws -> Outcome {
        guard !state.contentKeys.isEmpty else { return .denied(.noContentKeys, "Asset '\(request.assetId)' has no content keys.") }
        var keys: [(kid: Data, key: Data)] = []
        for kid in kids {
            let hex = HexKey.text(kid)
            guard let record = state.contentKeys.first(where: { $0.kid == hex }) else {
                return .denied(.keyNotOfAsset, "Key id \(hex) is not a key of asset '\(request.assetId)'.")
            }
            do { keys.append((kid, try sealing.unseal(record))) } catch let error as KeyEncryptionKeyError {
                throw ServiceError(.serviceUnavailable, error.description)
            }
        }
        guard let agreementKey = state.agreementKey else {
            return .denied(.noAgreementKey, "The device has registered no agreement key (PUT /v1/devices/{deviceId}/agreement-key).")
        }
        if let grantId = request.grantId {
            guard let named = state.named, named.state.holdsDownload else {
                return .denied(.grantEnded, "Grant '\(grantId)' has ended (wiped, revoked, released or deleted); ask without a grantId.")
            }
            guard named.assetId == request.assetId else {
                return .denied(.grantNotOfAsset, "Grant '\(grantId)' is of asset '\(named.assetId)', not '\(request.assetId)'.")
            }
        }
        let permission = DownloadPermissionRequest(assetId: request.assetId, grantId: request.grantId)
        switch DownloadGrantService.decide(permission, state.permission, now: now) {
        case .granted(let grant, _, let created):
            if let expiry = grant.window.expiryDate, expiry <= now {
                return .denied(.windowOver, "Asset '\(request.assetId)' expired at \(ISO8601DateFormatter().string(from: expiry)).")
            }
            // Asking again is safe and counts once, as for a permission: the held grant's
            // unreleased license of the same keys is answered again (wrapped anew), nothing
            // written. One that ran out (offline) is replaced by a new one.
            let asked = kids.map { HexKey.text($0) }
            if !created, let held = state.heldLicense, held.grantId == grant.grantId, held.system == request.system,
                Set(asked).isSubset(of: held.kids), held.expiresAt.map({ now < $0 }) ?? true
            {
                return .issued(held, grant: grant, keys: keys, agreementKey: agreementKey, created: false, recorded: false)
            }
            let license = LicenseRecord(
                licenseId: licenseId, applicationId: grant.applicationId, deviceId: grant.deviceId, userId: grant.userId,
                assetId: grant.assetId, grantId: grant.grantId, system: request.system, kids: asked, issuedAt: now,
                renewedAt: nil, expiresAt: expiresAt(grant.window, now: now), releasedAt: nil)
            return .issued(license, grant: grant, keys: keys, agreementKey: agreementKey, created: created, recorded: true)
        case .denied(let rule, let counts): return .limit(rule, counts)
        case .notEnabled: return .notEnabled
        case .ended(let grantId): return .denied(.grantEnded, "Grant '\(grantId)' has ended; ask without a grantId.")
        }
    }

    /// Releases a license of the device: its grant ends as `deleted` (it counts no more). Asking
    /// again is safe and answers the license as it is. 404 for a license that is not the device's.
    public func release(applicationId: String, deviceId: String, licenseId: String, _ request: LicenseReleaseRequest) async throws -> License {
        try Validate.identifier(licenseId, field: "licenseId")
        if let kids = request.kids { _ = try Self.keyIds(ClearKeyRequest(kids: kids)) }
        let now = now()
        let released = try await store.releaseLicense(
            applicationId: applicationId, deviceId: deviceId, licenseId: licenseId
        ) { license, grant -> (LicenseRecord?, DownloadGrantRecord?, (LicenseRecord, DownloadGrantState?)?) in
            guard var license else { return (nil, nil, nil) }
            guard license.releasedAt == nil else { return (nil, nil, (license, grant?.state)) }
            license.releasedAt = now
            guard var grant, grant.state.holdsDownload else { return (license, nil, (license, grant?.state)) }
            grant.state = .deleted
            grant.updatedAt = now
            return (license, grant, (license, grant.state))
        }
        guard let (license, grantState) = released else { throw ServiceError.notFound("No license '\(licenseId)' of this device.") }
        return Self.wire(license, grantState: grantState)
    }

    /// A sync's reported licenses: each renewed with a new end while its grant holds the asset and
    /// the window is open, or ended (with the reason) otherwise. One transaction.
    /// `held` is validated by the sync (`SyncService.validate`) before anything is written.
    func renew(applicationId: String, deviceId: String, _ held: [HeldLicense]) async throws -> [LicenseRenewal] {
        let now = now()
        let ids = held.map(\.licenseId)
        let firstPlays = Dictionary(held.map { ($0.licenseId, $0.firstPlayedAt) }, uniquingKeysWith: { first, _ in first })
        return try await store.renewLicenses(applicationId: applicationId, deviceId: deviceId, licenseIds: ids) { found in
            var renewed: [LicenseRecord] = []
            var answers: [String: LicenseRenewal] = [:]
            for (license, grant) in found {
                let answer = Self.renewal(of: license, grant: grant, firstPlayedAt: firstPlays[license.licenseId] ?? nil, now: now)
                if answer.status == .renewed {
                    var license = license
                    license.renewedAt = now
                    license.expiresAt = answer.expiresAt
                    renewed.append(license)
                }
                answers[license.licenseId] = answer
            }
            return (renewed, ids.map { answers[$0] ?? LicenseRenewal(licenseId: $0, status: .ended, reason: .unknownLicense) })
        }
    }

    /// The rule of a renewal. The end is the first of: the expiry date, the expiry after download
    /// (from the grant's completion when the device reported it, else from now), the expiry after
    /// play (from the first play the device reports), and the offline period from now.
    static func renewal(of license: LicenseRecord, grant: DownloadGrantRecord?, firstPlayedAt: Date?, now: Date) -> LicenseRenewal {
        guard license.releasedAt == nil, let grant, grant.state.holdsDownload else {
            return LicenseRenewal(licenseId: license.licenseId, status: .ended, reason: .grantEnded)
        }
        let end = Self.end(
            of: grant.window, downloadedAt: grant.state == .completed ? grant.updatedAt : now, firstPlayedAt: firstPlayedAt, now: now)
        if let end, end <= now { return LicenseRenewal(licenseId: license.licenseId, status: .ended, reason: .windowOver) }
        return LicenseRenewal(licenseId: license.licenseId, status: .renewed, expiresAt: end)
    }

    /// A device's licenses, newest first (admin).
    public func list(applicationId: String, deviceId: String, limit: Int?) async throws -> LicenseList {
        try Validate.identifier(deviceId, field: "deviceId")
        let limit = try Validate.pageLimit(limit, default: WireLimits.defaultPageSize, max: WireLimits.maxPageSize)
        let rows = try await store.licenses(applicationId: applicationId, deviceId: deviceId, limit: limit)
        return LicenseList(licenses: rows.map { Self.wire($0.license, grantState: $0.grantState) })
    }

    static func wire(_ license: LicenseRecord, grantState: DownloadGrantState?) -> License {
        let outstanding = license.releasedAt == nil && grantState?.holdsDownload == true
        return License(
            licenseId: license.licenseId, deviceId: license.deviceId, userId: license.userId, assetId: license.assetId,
            grantId: license.grantId, system: license.system, kids: license.kids, issuedAt: license.issuedAt, renewedAt: license.renewedAt,
            expiresAt: license.expiresAt, releasedAt: license.releasedAt, state: outstanding ? "outstanding" : "released")
    }

    // MARK: the rules of time

    /// The license ends at the first of: the asset's expiry date, the expiry after download
    /// (counted from now: the download has not finished), and the offline period (renewed at
    /// each sync). Nil when none applies.
    static func expiresAt(_ window: DownloadWindow, now: Date) -> Date? {
        end(of: window, downloadedAt: now, firstPlayedAt: nil, now: now)
    }

    /// The first of the window's ends: its expiry date, the expiry after download, the expiry
    /// after play (once played) and the offline period from now. Nil when none applies.
    static func end(of window: DownloadWindow, downloadedAt: Date, firstPlayedAt: Date?, now: Date) -> Date? {
        var ends: [Date] = []
        if let expiry = window.expiryDate { ends.append(expiry) }
        if window.expiryAfterDownloadSeconds >= 0 { ends.append(downloadedAt.addingTimeInterval(TimeInterval(window.expiryAfterDownloadSeconds))) }
        if window.expiryAfterPlaySeconds >= 0, let firstPlayedAt {
            ends.append(firstPlayedAt.addingTimeInterval(TimeInterval(window.expiryAfterPlaySeconds)))
        }
        if window.offlineViewingPeriodSeconds >= 0 { ends.append(now.addingTimeInterval(TimeInterval(window.offlineViewingPeriodSeconds))) }
        return ends.min()
    }

    /// Widevine's policy names for the same window (0: no limit).
    static func policy(_ window: DownloadWindow, expiresAt: Date?, now: Date) -> LicensePolicy {
        func seconds(until date: Date?) -> Int { date.map { max(1, Int($0.timeIntervalSince(now).rounded(.down))) } ?? 0 }
        let rentalEnds = [window.expiryDate, window.expiryAfterDownloadSeconds >= 0
            ? now.addingTimeInterval(TimeInterval(window.expiryAfterDownloadSeconds)) : nil].compactMap { $0 }.min()
        let duration = seconds(until: expiresAt)
        let renewal = window.offlineViewingPeriodSeconds >= 0 ? window.offlineViewingPeriodSeconds / 2 : duration / 2
        return LicensePolicy(
            canPersist: true, licenseDurationSeconds: duration, rentalDurationSeconds: seconds(until: rentalEnds),
            playbackDurationSeconds: max(0, window.expiryAfterPlaySeconds), renewWithUsage: false, renewalDelaySeconds: renewal)
    }

    // MARK: ClearKey

    /// Key ids from a ClearKey request (`ClearKeyRequest.keyIds`), refused as the request's field.
    static func keyIds(_ request: ClearKeyRequest) throws -> [Data] {
        do {
            return try request.keyIds()
        } catch {
            throw ServiceError.validation(error.message.replacingOccurrences(of: "'kids", with: "'request.kids"), field: "request.\(error.field)")
        }
    }

    /// The keys as a ClearKey license only the holder of `agreementKey` opens (`ClearKeyLicense`).
    static func wrap(_ keys: [(kid: Data, key: Data)], for agreementKey: Data, licenseId: String) throws -> ClearKeyLicense {
        let device = try P256.KeyAgreement.PublicKey(x963Representation: agreementKey)
        let ephemeral = P256.KeyAgreement.PrivateKey()
        let epk = ephemeral.publicKey.x963Representation
        let wrapping = try ephemeral.sharedSecretFromKeyAgreement(with: device).hkdfDerivedSymmetricKey(
            using: SHA256.self, salt: Data(licenseId.utf8), sharedInfo: Data(ClearKeyLicense.wrappingInfo.utf8) + epk, outputByteCount: 32)
        return ClearKeyLicense(
            keys: try keys.map { kid, key in
                guard let box = try AES.GCM.seal(key, using: wrapping, authenticating: kid).combined else {
                    throw KeyEncryptionKeyError("AES-GCM gave no combined box.")
                }
                return .init(kid: Base64URL.encode(kid), k: Base64URL.encode(box))
            },
            type: "persistent-license", epk: Base64URL.encode(epk))
    }

    static func denied(_ reason: LicenseDenial, _ message: String) -> ServiceError {
        ServiceError(.licenseDenied, message, details: ["reason": .string(reason.rawValue)])
    }
}
