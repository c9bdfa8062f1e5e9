import Crypto
import Foundation
import BackplaneWire

/// The license door: a device asks for an asset's keys; the backplane decides under the download
/// rules, in the transaction that records the grant (or uses the one the device holds) and the
/// license, and answers ClearKey itself with the keys wrapped for that device's agreement key.
/// Other systems' challenges are forwarded to the application's license server with the grant's
/// entitlement and the policy (`LicenseService+Forwarding.swift`). A release ends the license's
/// grant, so it counts no more against copies and limits.
public struct LicenseService: Sendable {
    let store: any BackplaneStore
    let contentKeys: ContentKeyService
    let licenseServers: LicenseServerService
    let entitlements: Entitlements
    let forwarder: LicenseServerForwarder
    let now: @Sendable () -> Date

    public init(
        store: any BackplaneStore, contentKeys: ContentKeyService, licenseServers: LicenseServerService, entitlements: Entitlements,
        forwarder: LicenseServerForwarder = LicenseServerForwarder(), now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.store = store
        self.contentKeys = contentKeys
        self.licenseServers = licenseServers
        self.entitlements = entitlements
        self.forwarder = forwarder
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
        /// `clearKey`: the keys and the agreement key they are wrapped for (nil when forwarded).
        case issued(LicenseRecord, grant: DownloadGrantRecord, clearKey: ClearKeyKeys?, created: Bool, recorded: Bool)
        case denied(LicenseDenial, String)
        case limit(DownloadRule, DownloadCounts)
        case notEnabled
    }

    /// A ClearKey license's keys in the clear, and the agreement key they are wrapped for.
    private struct ClearKeyKeys: Sendable {
        var keys: [(kid: Data, key: Data)]
        var agreementKey: Data
    }

    /// How a request is answered: by the backplane (ClearKey, its key ids), or by the
    /// application's license server (the CDM's challenge).
    private enum Answering: Sendable {
        case clearKey(kids: [Data], sealing: KeyEncryptionKey)
        case forwarded(challenge: Data, server: LicenseServerRecord)
    }

    /// A license for `request.assetId`: 201 with a new grant, 200 with the held one. Refused with
    /// `license_denied` (`details.reason`), `download_limit_reached` or `download_not_enabled`;
    /// a forward that failed is `license_server_failed` (502).
    public func issue(
        applicationId: String, deviceId: String, _ request: LicenseIssueRequest
    ) async throws -> (LicenseIssueResponse, created: Bool) {
        try Validate.identifier(request.assetId, field: "assetId")
        if let grantId = request.grantId { try Validate.identifier(grantId, field: "grantId") }
        let answering = try await answering(request, applicationId: applicationId)
        let now = now()
        let licenseId = Secrets.random(prefix: "lic_", byteCount: 12)
        let outcome = try await store.issueLicense(
            applicationId: applicationId, deviceId: deviceId, assetId: request.assetId, grantId: request.grantId
        ) { state -> (LicenseIssue?, Outcome) in
            let decision = try Self.decide(request, answering, state, licenseId: licenseId, now: now)
            if case .issued(let license, let grant, _, let created, true) = decision {
                return (LicenseIssue(grant: created ? grant : nil, license: license), decision)
            }
            return (nil, decision)
        }
        switch outcome {
        case .issued(let license, let grant, let clearKey, let created, let recorded):
            var response = LicenseIssueResponse(
                licenseId: license.licenseId, grantId: license.grantId, assetId: license.assetId, system: license.system,
                expiresAt: license.expiresAt, policy: Self.policy(grant.window, expiresAt: license.expiresAt, now: now), clearKey: nil)
            if let clearKey {
                response.clearKey = try Self.wrap(clearKey.keys, for: clearKey.agreementKey, licenseId: license.licenseId)
            } else if case .forwarded(let challenge, let server) = answering {
                response.license = try await forward(
                    challenge, for: license, grant: grant, policy: response.policy, to: server, recorded: recorded
                ).base64EncodedString()
            }
            return (response, created)
        case .denied(let reason, let message):
            throw Self.denied(reason, message)
        case .limit(let rule, let counts):
            throw ServiceError.downloadLimitReached(rule: rule, counts: counts)
        case .notEnabled:
            throw ServiceError(.downloadNotEnabled, "Device '\(deviceId)' is not download-enabled; enable it (within the device limit) first.")
        }
    }

    /// Whether the backplane answers the request itself or forwards it, and with what; refused
    /// when its form is not the system's or no server is configured for the system.
    private func answering(_ request: LicenseIssueRequest, applicationId: String) async throws -> Answering {
        switch (request.system, request.request) {
        case (.clearKey, .clearKey(let clearKey)):
            return .clearKey(kids: try Self.keyIds(clearKey), sealing: try contentKeys.keyEncryptionKey())
        case (.clearKey, .opaque):
            throw Self.denied(.wrongRequestForSystem, "A ClearKey request is the W3C ClearKey JSON object ({\"kids\":[…]}), not a challenge.")
        case (_, .clearKey):
            throw Self.denied(
                .wrongRequestForSystem, "A \(request.system.rawValue) request is the CDM's challenge, base64, in a JSON string.")
        case (_, .opaque(let challenge)):
            guard let server = try await licenseServers.server(applicationId: applicationId, system: request.system) else {
                throw Self.denied(.systemNotConfigured, "No license server is configured for \(request.system.rawValue).")
            }
            return .forwarded(challenge: challenge, server: server)
        }
    }

    /// The door's rules, in order: for ClearKey, the asset has keys and those asked are its own,
    /// and the device can receive them; the grant named still holds the asset; then the download
    /// rules, as a permission request (the held grant, or a new one within the limits); the window
    /// is open.
    private static func decide(
        _ request: LicenseIssueRequest, _ answering: Answering, _ state: LicenseDoorState, licenseId: String, now: Date
    ) throws -> Outcome {
        var clearKey: ClearKeyKeys?
        var kids: [Data] = []
        if case .clearKey(let asked, let sealing) = answering {
            kids = asked
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
            clearKey = ClearKeyKeys(keys: keys, agreementKey: agreementKey)
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
                return .issued(held, grant: grant, clearKey: clearKey, created: false, recorded: false)
            }
            let license = LicenseRecord(
                licenseId: licenseId, applicationId: grant.applicationId, deviceId: grant.deviceId, userId: grant.userId,
                assetId: grant.assetId, grantId: grant.grantId, system: request.system, kids: asked, issuedAt: now,
                renewedAt: nil, expiresAt: expiresAt(grant.window, now: now), releasedAt: nil)
            return .issued(license, grant: grant, clearKey: clearKey, created: created, recorded: true)
        case .denied(let rule, let counts): return .limit(rule, counts)
        case .notEnabled: return .notEnabled
        case .ended(let grantId): return .denied(.grantEnded, "Grant '\(grantId)' has ended; ask without a grantId.")
        }
    }

    /// Releases a license of the device: its grant ends as `deleted` (it counts no more). Asking
    /// again is safe and answers the license as it is. 404 for a license that is not the device's.
    /// A forwarded system's release goes on to its license server, each time it is asked
    /// (`forwardRelease`).
    public func release(
        applicationId: String, deviceId: String, licenseId: String, _ request: LicenseReleaseRequest
    ) async throws -> LicenseReleaseResponse {
        try Validate.identifier(licenseId, field: "licenseId")
        if let kids = request.kids { _ = try Self.keyIds(ClearKeyRequest(kids: kids)) }
        let message = try Self.releaseMessage(request)
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
        return LicenseReleaseResponse(
            license: Self.wire(license, grantState: grantState),
            licenseServerAnswer: try await forwardRelease(of: license, message: message)?.base64EncodedString())
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
