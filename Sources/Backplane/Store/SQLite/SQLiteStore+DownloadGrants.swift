import Foundation
import GRDB
import BackplaneWire

/// Download grants, counted and recorded in one transaction, and the entitlement signing keys.
extension SQLiteStore {
    public func grantDownload<Decision: Sendable>(
        applicationId: String, deviceId: String, assetId: String,
        decide: @escaping @Sendable (DownloadPermissionState) throws -> (DownloadGrantRecord?, Decision)
    ) async throws -> Decision {
        try await write { db in
            let state = try Self.permissionState(db, applicationId: applicationId, deviceId: deviceId, assetId: assetId)
            let (grant, decision) = try decide(state)
            if var grant { try grant.insert(db) }
            return decision
        }
    }

    /// What a download permission (or a license) is decided on, read in the caller's transaction.
    static func permissionState(_ db: Database, applicationId: String, deviceId: String, assetId: String) throws -> DownloadPermissionState {
        guard let device = try Self.device(db, applicationId: applicationId, deviceId: deviceId) else {
            throw StoreError.unknownDevice(deviceId)
        }
        guard let application = try ApplicationRecord.fetchOne(db, key: applicationId) else {
            throw StoreError.unknownApplication(applicationId)
        }
        let holding = Self.holdsDownload
        let ofUser = DownloadGrantRecord.filter { $0.applicationId == applicationId && $0.userId == device.userId }
        let ofAsset = ofUser.filter { $0.assetId == assetId }
        return DownloadPermissionState(
            device: device, settings: application.settings,
            held: try ofAsset.filter { $0.deviceId == deviceId }.filter(holding).fetchOne(db),
            accountHeld: try ofUser.filter(holding).fetchCount(db),
            deviceHeld: try DownloadGrantRecord
                .filter { $0.applicationId == applicationId && $0.deviceId == deviceId }.filter(holding).fetchCount(db),
            copiesHeld: try ofAsset.filter(holding).fetchCount(db),
            lifetime: try ofAsset.filter { $0.countsForLifetime }.fetchCount(db),
            policy: try AssetPolicyRecord.fetchOne(db, key: ["application_id": applicationId, "asset_id": assetId])?.policy,
            episode: try EpisodeRecord
                .filter { $0.applicationId == applicationId && $0.assetId == assetId && $0.retractedAt == nil }
                .order(EpisodeRecord.Columns.updatedAt.desc).fetchOne(db)?.episode)
    }

    public func downloadGrant(applicationId: String, grantId: String) async throws -> DownloadGrantRecord? {
        try await read { db in
            try DownloadGrantRecord.filter { $0.applicationId == applicationId && $0.grantId == grantId }.fetchOne(db)
        }
    }

    public func downloadGrants(
        applicationId: String, userId: String?, deviceId: String?, beforeRowId: Int64?, limit: Int
    ) async throws -> [DownloadGrantRecord] {
        try await read { db in
            var request = DownloadGrantRecord.filter { $0.applicationId == applicationId }
            if let userId { request = request.filter { $0.userId == userId } }
            if let deviceId { request = request.filter { $0.deviceId == deviceId } }
            if let beforeRowId { request = request.filter { $0.rowId < beforeRowId } }
            return try request.order(\.rowId.desc).limit(limit).fetchAll(db)
        }
    }

    public func resetLifetimeDownloads(applicationId: String, userId: String, assetId: String, at: Date) async throws -> Int? {
        let columns = DownloadGrantRecord.Columns.self
        let ofAsset = DownloadGrantRecord
            .filter { $0.applicationId == applicationId && $0.userId == userId }
            .filter { $0.assetId == assetId }
        return try await write { db in
            guard try ofAsset.isEmpty(db) == false else { return nil }
            return try ofAsset.filter { $0.countsForLifetime }
                .updateAll(db, [columns.countsForLifetime.set(to: false), columns.updatedAt.set(to: at)])
        }
    }

    /// Grants that hold a download: they count toward the account, copies and device limits.
    static let holdsDownload = DownloadGrantState.allCases.filter(\.holdsDownload).contains(DownloadGrantRecord.Columns.state)

    /// The states that hold a download are this enum's own raw values, so they can be written into the SQL.
    private static let releaseAllSQL = """
        UPDATE download_grants SET state = ?, updated_at = ? WHERE application_id = ? AND device_id = ?
        AND state IN (\(DownloadGrantState.allCases.filter(\.holdsDownload).map { "'\($0.rawValue)'" }.joined(separator: ", ")))
        """

    /// Ends the device's grants that hold a download (of `assetIds`, or all) as `released`: the
    /// device was wiped, killed or unregistered, or deleted the assets on command.
    static func releaseGrants(_ db: Database, applicationId: String, deviceId: String, assetIds: [String]?, at: Date) throws {
        guard let assetIds else {
            // All of them (a wipe, a kill, an unregistration), through a statement prepared once:
            // the query interface generated and authorized this SQL on every acknowledged wipe.
            try db.cachedStatement(sql: releaseAllSQL).execute(arguments: [DownloadGrantState.released.rawValue, at.stored, applicationId, deviceId])
            return
        }
        var request = DownloadGrantRecord
            .filter { $0.applicationId == applicationId && $0.deviceId == deviceId }
            .filter(Self.holdsDownload)
        request = request.filter(assetIds.contains(DownloadGrantRecord.Columns.assetId))
        try request.updateAll(db, [
            DownloadGrantRecord.Columns.state.set(to: DownloadGrantState.released), DownloadGrantRecord.Columns.updatedAt.set(to: at),
        ])
    }

    public func setAssetPolicy(_ record: AssetPolicyRecord) async throws {
        try await write { db in
            var record = record
            try record.upsert(db)
        }
    }

    public func assetPolicy(applicationId: String, assetId: String) async throws -> AssetPolicyRecord? {
        try await read { db in try AssetPolicyRecord.fetchOne(db, key: ["application_id": applicationId, "asset_id": assetId]) }
    }

    public func deleteAssetPolicy(applicationId: String, assetId: String) async throws -> Bool {
        try await write { db in try AssetPolicyRecord.deleteOne(db, key: ["application_id": applicationId, "asset_id": assetId]) }
    }

    public func entitlementKeys(
        applicationId: String, orCreate make: (@Sendable () -> EntitlementKeyRecord)?
    ) async throws -> [EntitlementKeyRecord] {
        let request = EntitlementKeyRecord
            .filter { $0.applicationId == applicationId && $0.retiredAt == nil }
            .order(Column.rowID.desc)  // insertion order: the newest signs
        let keys = try await read { db in try request.fetchAll(db) }
        guard keys.isEmpty, let make else { return keys }
        return try await write { db in
            // Another request may have created it meanwhile.
            let keys = try request.fetchAll(db)
            guard keys.isEmpty else { return keys }
            var key = make()
            try key.insert(db)
            return [key]
        }
    }

    public func addEntitlementKey(_ key: EntitlementKeyRecord) async throws {
        try await write { db in
            var key = key
            try key.insert(db)
        }
    }

    public func retireEntitlementKey(applicationId: String, keyId: String, at: Date) async throws -> EntitlementKeyRecord? {
        try await write { db in
            guard var key = try EntitlementKeyRecord.filter({ $0.applicationId == applicationId && $0.keyId == keyId }).fetchOne(db) else {
                return nil
            }
            if key.retiredAt == nil {
                key.retiredAt = at
                try key.update(db)
            }
            return key
        }
    }
}
