import Crypto
import Foundation
import JWTKit
import BackplaneWire

/// Signs entitlements: compact JWS tokens (EdDSA, Ed25519) that say a device held a grant of an
/// asset when the token was issued, for an app's DRM license server to check before it issues a
/// persistent license. A token expires after `lifetime`: a device asks again (and gets the same
/// grant, with a new token) to renew, which an ended grant cannot. Each application has its own
/// keys; the newest signs, and every unretired key is published at
/// `/v1/applications/{applicationId}/entitlement-keys` so that tokens signed before a rotation
/// still verify. The first key is made when the first grant is signed.
public struct Entitlements: Sendable {
    let store: any BackplaneStore
    let now: @Sendable () -> Date

    /// How long a token is accepted after it was issued: long enough for the license request
    /// that follows a grant, short enough that an ended grant's token soon stops working.
    public static let lifetime: TimeInterval = 3600

    public init(store: any BackplaneStore, now: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.now = now
    }

    /// Tokens for grants of one application, signed by its current key; nil for a grant that has
    /// ended (no token is issued for it any more).
    func tokens(for grants: [DownloadGrantRecord]) async throws -> [String?] {
        guard let applicationId = grants.first(where: \.state.holdsDownload)?.applicationId else { return grants.map { _ in nil } }
        let key = try await keys(applicationId, creating: true)[0]
        let kid = JWKIdentifier(string: key.keyId)
        let signer = JWTKeyCollection()
        await signer.add(eddsa: EdDSA.PrivateKey(backing: try Curve25519.Signing.PrivateKey(rawRepresentation: key.privateKey)), kid: kid)
        let issuedAt = Int64(now().timeIntervalSince1970)
        var tokens: [String?] = []
        for grant in grants {
            precondition(grant.applicationId == applicationId, "grants of one application")
            guard grant.state.holdsDownload else {
                tokens.append(nil)
                continue
            }
            let claims = EntitlementClaims(
                aud: grant.applicationId, sub: grant.userId, jti: grant.grantId, iat: issuedAt, exp: issuedAt + Int64(Self.lifetime),
                deviceId: grant.deviceId, assetId: grant.assetId, window: grant.window)
            tokens.append(try await signer.sign(claims, kid: kid))
        }
        return tokens
    }

    /// The public keys that verify the application's entitlements, newest first (none before
    /// its first grant: reading them creates nothing).
    public func keySet(applicationId: String) async throws -> EntitlementKeySet {
        EntitlementKeySet(keys: try await keys(applicationId, creating: false).map { key in
            let publicKey = try Curve25519.Signing.PrivateKey(rawRepresentation: key.privateKey).publicKey
            return .init(x: Base64URL.encode(Array(publicKey.rawRepresentation)), kid: key.keyId)
        })
    }

    /// Rotation: a new key signs from now on; the old ones keep verifying until retired.
    public func rotate(applicationId: String) async throws -> EntitlementKeySet {
        try await store.addEntitlementKey(Self.newKey(applicationId: applicationId, at: now()))
        return try await keySet(applicationId: applicationId)
    }

    /// Tokens signed by a retired key stop verifying. The signing key cannot be retired: rotate first.
    public func retire(applicationId: String, keyId: String) async throws -> EntitlementKeySet {
        let current = try await keys(applicationId, creating: false)
        guard current.contains(where: { $0.keyId == keyId }) else {
            throw ServiceError.notFound("No unretired entitlement key '\(keyId)'.")
        }
        guard current[0].keyId != keyId else {
            throw ServiceError.conflict("Key '\(keyId)' signs the entitlements; rotate to a new key before retiring it.")
        }
        _ = try await store.retireEntitlementKey(applicationId: applicationId, keyId: keyId, at: now())
        return try await keySet(applicationId: applicationId)
    }

    private func keys(_ applicationId: String, creating: Bool) async throws -> [EntitlementKeyRecord] {
        let now = now()
        var make: (@Sendable () -> EntitlementKeyRecord)?
        if creating { make = { @Sendable in Self.newKey(applicationId: applicationId, at: now) } }
        return try await store.entitlementKeys(applicationId: applicationId, orCreate: make)
    }

    private static func newKey(applicationId: String, at now: Date) -> EntitlementKeyRecord {
        EntitlementKeyRecord(
            keyId: Secrets.entitlementKeyId(), applicationId: applicationId,
            privateKey: Curve25519.Signing.PrivateKey().rawRepresentation, createdAt: now, retiredAt: nil)
    }
}

extension EntitlementClaims: JWTPayload {
    /// The token's own expiry. A license server then checks `aud`, `deviceId` and `assetId`
    /// against the license request.
    public func verify(using algorithm: some JWTAlgorithm) async throws {
        try ExpirationClaim(value: Date(timeIntervalSince1970: TimeInterval(exp))).verifyNotExpired()
    }
}
