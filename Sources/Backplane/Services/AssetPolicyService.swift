import Foundation
import BackplaneWire

/// Admins' rules for single assets: availability and a lifetime download limit over the
/// application's settings (and the asset's episode). Permissions granted from then on carry them.
public struct AssetPolicyService: Sendable {
    let store: any BackplaneStore
    let now: @Sendable () -> Date

    public init(store: any BackplaneStore, now: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.now = now
    }

    /// Creates or replaces the policy; 400 for a value out of range or a window that ends
    /// before it starts (nothing is stored then).
    public func set(applicationId: String, assetId: String, _ policy: AssetPolicy) async throws -> AssetPolicyEntry {
        try Validate.identifier(assetId, field: "assetId")
        try Validate.availability(policy.availability, maxLifetimeDownloads: policy.maxLifetimeDownloads)
        let record = AssetPolicyRecord(applicationId: applicationId, assetId: assetId, policy: policy, updatedAt: now())
        try await store.setAssetPolicy(record)
        return Self.wire(record)
    }

    /// 404 when the asset has no policy.
    public func get(applicationId: String, assetId: String) async throws -> AssetPolicyEntry {
        try Validate.identifier(assetId, field: "assetId")
        guard let record = try await store.assetPolicy(applicationId: applicationId, assetId: assetId) else {
            throw ServiceError.notFound("No policy for asset '\(assetId)'.")
        }
        return Self.wire(record)
    }

    /// 404 when the asset has no policy.
    public func delete(applicationId: String, assetId: String) async throws {
        try Validate.identifier(assetId, field: "assetId")
        guard try await store.deleteAssetPolicy(applicationId: applicationId, assetId: assetId) else {
            throw ServiceError.notFound("No policy for asset '\(assetId)'.")
        }
    }

    static func wire(_ record: AssetPolicyRecord) -> AssetPolicyEntry {
        AssetPolicyEntry(assetId: record.assetId, policy: record.policy, updatedAt: record.updatedAt)
    }
}
