import Crypto
import Foundation
import JWTKit
import BackplaneWire

/// Signs entitlements: compact JWS tokens (EdDSA, Ed25519) that say a device was granted an
/// asset, for an app's DRM license server to check before it issues a persistent license. Each
/// application has its own keys; the newest signs, and every unretired key is published at
/// `/v1/applications/{applicationId}/entitlement-keys` so that tokens signed before a rotation
/// still verify. The first key is made when first needed.
public struct Entitlements: Sendable {
    let store: any BackplaneStore
    let now: @Sendable () -> Date

    public init(store: any BackplaneStore, now: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.now = now
    }

    /// The tokens for grants of one application, signed by its current key. Ed25519 signatures
    /// are deterministic: the same grant, signed by the same key, gives the same token every
    /// time, so none is stored.
    func tokens(for grants: [DownloadGrantRecord]) async throws -> [String] {
        guard let applicationId = grants.first?.applicationId else { return [] }
        let key = try await keys(applicationId)[0]
        let kid = JWKIdentifier(string: key.keyId)
        let signer = JWTKeyCollection()
        await signer.add(eddsa: EdDSA.PrivateKey(backing: try Curve25519.Signing.PrivateKey(rawRepresentation: key.privateKey)), kid: kid)
        var tokens: [String] = []
        for grant in grants {
            precondition(grant.applicationId == applicationId, "grants of one application")
            let claims = EntitlementClaims(
                aud: grant.applicationId, sub: grant.userId, jti: grant.grantId, iat: Int64(grant.grantedAt.timeIntervalSince1970),
                deviceId: grant.deviceId, assetId: grant.assetId, window: grant.window)
            tokens.append(try await signer.sign(claims, kid: kid))
        }
        return tokens
    }

    /// The public keys that verify the application's entitlements, newest first.
    public func keySet(applicationId: String) async throws -> EntitlementKeySet {
        EntitlementKeySet(keys: try await keys(applicationId).map { key in
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
        let current = try await keys(applicationId)
        guard current.contains(where: { $0.keyId == keyId }) else {
            throw BackplaneError.notFound("No unretired entitlement key '\(keyId)'.")
        }
        guard current[0].keyId != keyId else {
            throw BackplaneError.conflict("Key '\(keyId)' signs the entitlements; rotate to a new key before retiring it.")
        }
        _ = try await store.retireEntitlementKey(applicationId: applicationId, keyId: keyId, at: now())
        return try await keySet(applicationId: applicationId)
    }

    private func keys(_ applicationId: String) async throws -> [EntitlementKeyRecord] {
        let now = now()
        return try await store.entitlementKeys(applicationId: applicationId) { Self.newKey(applicationId: applicationId, at: now) }
    }

    private static func newKey(applicationId: String, at now: Date) -> EntitlementKeyRecord {
        EntitlementKeyRecord(
            keyId: Secrets.entitlementKeyId(), applicationId: applicationId,
            privateKey: Curve25519.Signing.PrivateKey().rawRepresentation, createdAt: now, retiredAt: nil)
    }
}

extension EntitlementClaims: JWTPayload {
    /// The claims hold nothing that expires on its own: the window runs from the download and
    /// first play, which only the device knows. A license server checks `aud`, `deviceId` and
    /// `assetId` against the license request.
    public func verify(using algorithm: some JWTAlgorithm) async throws {}
}
