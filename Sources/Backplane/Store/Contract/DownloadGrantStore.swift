import Foundation
import BackplaneWire

/// Download grants and the keys that sign their entitlements. A grant is decided and recorded in
/// the transaction that counts the user's grants, so concurrent requests never exceed a limit.
public protocol DownloadGrantStore: Sendable {
    /// One transaction: reads the device, the settings, the counts, the policy and the episode of
    /// `assetId`, asks
    /// `decide`, and inserts the grant it returns, if any (nil keeps the held one). Throws
    /// `StoreError.unknownDevice` when there is no such device.
    func grantDownload<Decision: Sendable>(
        applicationId: String, deviceId: String, assetId: String,
        decide: @escaping @Sendable (DownloadPermissionState) throws -> (DownloadGrantRecord?, Decision)
    ) async throws -> Decision
    func downloadGrant(applicationId: String, grantId: String) async throws -> DownloadGrantRecord?
    /// A page of grants of a user or a device (all when both are nil), newest first, before `beforeRowId`.
    func downloadGrants(
        applicationId: String, userId: String?, deviceId: String?, beforeRowId: Int64?, limit: Int
    ) async throws -> [DownloadGrantRecord]
    /// Takes the user's downloads of the asset out of its lifetime count; returns how many, or
    /// nil when the user was never granted the asset.
    func resetLifetimeDownloads(applicationId: String, userId: String, assetId: String, at: Date) async throws -> Int?

    /// Creates or replaces an asset's policy.
    func setAssetPolicy(_ record: AssetPolicyRecord) async throws
    func assetPolicy(applicationId: String, assetId: String) async throws -> AssetPolicyRecord?
    /// False when there was none.
    func deleteAssetPolicy(applicationId: String, assetId: String) async throws -> Bool

    /// The application's unretired entitlement keys, newest first. When there is none, `make`
    /// (if given) creates the first one in the same transaction.
    func entitlementKeys(
        applicationId: String, orCreate make: (@Sendable () -> EntitlementKeyRecord)?
    ) async throws -> [EntitlementKeyRecord]
    /// Adds a key that becomes the signing key.
    func addEntitlementKey(_ key: EntitlementKeyRecord) async throws
    /// Retires a key (tokens it signed stop verifying). Nil when the key is unknown.
    func retireEntitlementKey(applicationId: String, keyId: String, at: Date) async throws -> EntitlementKeyRecord?
}

/// A download granted to a device: it counts toward the user's limits while it holds a download
/// (`active`, `completed`) and toward the asset's lifetime downloads until an admin resets the count.
public struct DownloadGrantRecord: Sendable, Equatable, Codable {
    /// Store-assigned, increasing: the key of admin pagination. Nil before the first insert.
    public var rowId: Int64?
    public var grantId: String
    public var applicationId: String
    public var userId: String
    public var deviceId: String
    public var assetId: String
    public var state: DownloadGrantState
    /// False once an admin reset the user's lifetime count of the asset.
    public var countsForLifetime: Bool
    public var window: DownloadWindow
    public var grantedAt: Date
    public var updatedAt: Date
}

/// What a permission decision sees, read inside the store's transaction that records the grant,
/// so that no concurrent request can push a count over its limit.
public struct DownloadPermissionState: Sendable {
    public var device: DeviceRecord
    public var settings: ApplicationSettings
    /// The device's grant of this asset that still holds a download, if any.
    public var held: DownloadGrantRecord?
    /// Grants holding a download across the user's devices.
    public var accountHeld: Int
    /// Grants holding a download on this device.
    public var deviceHeld: Int
    /// Grants of this asset holding a download across the user's devices.
    public var copiesHeld: Int
    /// Grants of this asset to the user that count toward its lifetime downloads.
    public var lifetime: Int
    /// The admin's policy for the asset, if any.
    public var policy: AssetPolicy?
    /// The asset's episode (the most recently updated one still published, when several feeds
    /// carry it), if any.
    public var episode: EpisodeInput?
}

/// An admin's rules for one asset.
public struct AssetPolicyRecord: Sendable, Equatable, Codable {
    public var applicationId: String
    public var assetId: String
    public var policy: AssetPolicy
    public var updatedAt: Date
}

/// A key that signs entitlements. The newest unretired key of an application signs; every
/// unretired key is published, so tokens signed before a rotation still verify.
public struct EntitlementKeyRecord: Sendable, Equatable, Codable {
    public var keyId: String
    public var applicationId: String
    /// The Ed25519 private key's raw 32 bytes.
    public var privateKey: Data
    public var createdAt: Date
    public var retiredAt: Date?
}
