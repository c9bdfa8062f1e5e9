import Foundation
import BackplaneWire

/// What the signing check of `HTTP/Authentication.swift` asks of the store, as calls of a
/// service (HTTP/ reaches the store through services only; `scripts/check-architecture`): the
/// app key that signed a request, and the spending of its nonce.
extension ApplicationService {
    /// The live app key `keyId`, nil when there is none or it was revoked.
    func signingKey(id keyId: String) async throws -> AppKeyRecord? {
        try await store.appKey(id: keyId).flatMap { $0.revokedAt == nil ? $0 : nil }
    }

    /// Records a signed request's nonce, or refuses its replay (401 `nonce_reused`).
    func spend(_ nonce: SignedRequestRecord) async throws {
        try await store.spend(nonce)
    }
}

/// The store's health, for `/readyz` and `/metrics`.
public struct StoreHealth: Sendable {
    let store: any BackplaneStore

    /// The database answers.
    public func isReachable() async -> Bool { await store.isReachable() }

    /// Nonces remembered now (a gauge of `/metrics`).
    public func nonceCount() async throws -> Int { try await store.nonceCount() }
}
