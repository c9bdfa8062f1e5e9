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

    /// What a download permission (or a license) is decided on, read in the caller's transaction,
    /// through statements prepared once: every permission and license runs it while no other
    /// write can, and the query interface prepared nine statements per call (most of a
    /// permission's time on the writer, `benchmarks/licenses`).
    static func permissionState(_ db: Database, applicationId: String, deviceId: String, assetId: String) throws -> DownloadPermissionState {
        guard let device = try Self.device(db, applicationId: applicationId, deviceId: deviceId) else {
            throw StoreError.unknownDevice(deviceId)
        }
        guard let settings = try String.fetchOne(db.cachedStatement(sql: "SELECT settings FROM applications WHERE id = ?"), arguments: [applicationId])
        else { throw StoreError.unknownApplication(applicationId) }
        let counts = try Row.fetchOne(db.cachedStatement(sql: permissionCountsSQL), arguments: [
            applicationId, device.userId, applicationId, deviceId, applicationId, device.userId, assetId, applicationId, device.userId, assetId,
        ])
        let policy = try String.fetchOne(
            db.cachedStatement(sql: "SELECT policy FROM asset_policies WHERE application_id = ? AND asset_id = ?"), arguments: [applicationId, assetId])
        let episode = try String.fetchOne(
            db.cachedStatement(sql: """
                SELECT episode FROM episodes WHERE application_id = ? AND asset_id = ? AND retracted_at IS NULL ORDER BY updated_at DESC LIMIT 1
                """), arguments: [applicationId, assetId])
        return DownloadPermissionState(
            device: device, settings: try StoredJSON.decode(ApplicationSettings.self, settings),
            held: try DownloadGrantRecord.fetchOne(db.cachedStatement(sql: heldGrantSQL), arguments: [applicationId, device.userId, assetId, deviceId]),
            accountHeld: counts?[0] ?? 0, deviceHeld: counts?[1] ?? 0, copiesHeld: counts?[2] ?? 0, lifetime: counts?[3] ?? 0,
            policy: try policy.map { try StoredJSON.decode(AssetPolicy.self, $0) },
            episode: try episode.map { try StoredJSON.decode(EpisodeInput.self, $0) })
    }

    /// The states that hold a download, written into the SQL (this enum's own raw values).
    private static let holdingList = DownloadGrantState.allCases.filter(\.holdsDownload).map { "'\($0.rawValue)'" }.joined(separator: ", ")

    /// The account's, the device's and the asset's held grants, and the asset's lifetime count.
    private static let permissionCountsSQL = """
        SELECT
            (SELECT COUNT(*) FROM download_grants WHERE application_id = ? AND user_id = ? AND state IN (\(holdingList))),
            (SELECT COUNT(*) FROM download_grants WHERE application_id = ? AND device_id = ? AND state IN (\(holdingList))),
            (SELECT COUNT(*) FROM download_grants WHERE application_id = ? AND user_id = ? AND asset_id = ? AND state IN (\(holdingList))),
            (SELECT COUNT(*) FROM download_grants WHERE application_id = ? AND user_id = ? AND asset_id = ? AND counts_for_lifetime)
        """

    private static let heldGrantSQL = """
        SELECT * FROM download_grants WHERE application_id = ? AND user_id = ? AND asset_id = ? AND device_id = ?
        AND state IN (\(holdingList)) ORDER BY row_id LIMIT 1
        """

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
