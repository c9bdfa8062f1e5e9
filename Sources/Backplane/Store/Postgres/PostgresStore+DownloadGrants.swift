import Foundation
import PostgresNIO
import BackplaneWire

/// Download grants, counted and recorded under the device's and the user's locks, and the
/// entitlement signing keys.
extension PostgresStore {
    /// The grant states that hold a download: they count toward the account, copies and device limits.
    static let holdingStates = DownloadGrantState.allCases.filter(\.holdsDownload).map(\.rawValue)

    public func grantDownload<Decision: Sendable>(
        applicationId: String, deviceId: String, assetId: String,
        decide: @escaping @Sendable (DownloadPermissionState) throws -> (DownloadGrantRecord?, Decision)
    ) async throws -> Decision {
        try await transaction { [logger] connection in
            let state = try await Self.permissionState(
                connection, applicationId: applicationId, deviceId: deviceId, assetId: assetId, logger: logger)
            let (grant, decision) = try decide(state)
            if let grant { try await Self.insert(connection, grant, logger: logger) }
            return decision
        }
    }

    /// What a download permission (or a license) is decided on, read in the caller's transaction
    /// under the device's and the user's locks.
    static func permissionState(
        _ connection: PostgresConnection, applicationId: String, deviceId: String, assetId: String, logger: Logger
    ) async throws -> DownloadPermissionState {
        try await Self.lockDevice(connection, applicationId: applicationId, deviceId: deviceId, logger: logger)
        guard let device = try await Self.device(connection, applicationId: applicationId, deviceId: deviceId, logger: logger) else {
            throw StoreError.unknownDevice(deviceId)
        }
        try await Self.lockUser(connection, applicationId: applicationId, userId: device.userId, logger: logger)
        let holding = Self.holdingStates
        let counts = try await connection.rows("""
            SELECT a.settings::text AS settings,
                (SELECT COUNT(*) FROM download_grants WHERE application_id = a.id AND user_id = \(device.userId)
                    AND state = ANY(\(holding))) AS account_held,
                (SELECT COUNT(*) FROM download_grants WHERE application_id = a.id AND device_id = \(deviceId)
                    AND state = ANY(\(holding))) AS device_held,
                (SELECT COUNT(*) FROM download_grants WHERE application_id = a.id AND user_id = \(device.userId)
                    AND asset_id = \(assetId) AND state = ANY(\(holding))) AS copies_held,
                (SELECT COUNT(*) FROM download_grants WHERE application_id = a.id AND user_id = \(device.userId)
                    AND asset_id = \(assetId) AND counts_for_lifetime) AS lifetime,
                (SELECT policy::text FROM asset_policies WHERE application_id = a.id AND asset_id = \(assetId)) AS policy,
                (SELECT episode::text FROM episodes WHERE application_id = a.id AND asset_id = \(assetId) AND retracted_at IS NULL
                    ORDER BY updated_at DESC LIMIT 1) AS episode
            FROM applications a WHERE a.id = \(applicationId)
            """, logger: logger)
        guard let row = counts.first.map(StoredRow.init) else { throw StoreError.unknownApplication(applicationId) }
        let held = try await connection.rows("""
            SELECT \(unescaped: PostgresColumns.grant) FROM download_grants
            WHERE application_id = \(applicationId) AND user_id = \(device.userId) AND asset_id = \(assetId) AND device_id = \(deviceId)
              AND state = ANY(\(holding))
            ORDER BY row_id LIMIT 1
            """, logger: logger).records(DownloadGrantRecord.init).first
        return DownloadPermissionState(
            device: device, settings: try row.json("settings"), held: held,
            accountHeld: try row("account_held"), deviceHeld: try row("device_held"), copiesHeld: try row("copies_held"),
            lifetime: try row("lifetime"), policy: try row.json("policy", as: AssetPolicy?.self),
            episode: try row.json("episode", as: EpisodeInput?.self))
    }

    public func downloadGrant(applicationId: String, grantId: String) async throws -> DownloadGrantRecord? {
        try await rows("""
            SELECT \(unescaped: PostgresColumns.grant) FROM download_grants WHERE application_id = \(applicationId) AND grant_id = \(grantId)
            """).records(DownloadGrantRecord.init).first
    }

    public func downloadGrants(
        applicationId: String, userId: String?, deviceId: String?, beforeRowId: Int64?, limit: Int
    ) async throws -> [DownloadGrantRecord] {
        try await rows("""
            SELECT \(unescaped: PostgresColumns.grant) FROM download_grants
            WHERE application_id = \(applicationId)
              AND (\(userId)::text IS NULL OR user_id = \(userId))
              AND (\(deviceId)::text IS NULL OR device_id = \(deviceId))
              AND row_id < \(beforeRowId ?? Int64.max)
            ORDER BY row_id DESC LIMIT \(limit)
            """).records(DownloadGrantRecord.init)
    }

    public func resetLifetimeDownloads(applicationId: String, userId: String, assetId: String, at: Date) async throws -> Int? {
        try await transaction { [logger] connection in
            let granted = try await connection.rows("""
                SELECT 1 FROM download_grants WHERE application_id = \(applicationId) AND user_id = \(userId) AND asset_id = \(assetId) LIMIT 1
                """, logger: logger)
            guard !granted.isEmpty else { return nil }
            return try await connection.rows("""
                UPDATE download_grants SET counts_for_lifetime = false, updated_at = \(at)
                WHERE application_id = \(applicationId) AND user_id = \(userId) AND asset_id = \(assetId) AND counts_for_lifetime
                RETURNING 1
                """, logger: logger).count
        }
    }

    /// Writes a grant's changing columns (a report's transition).
    static func updateState(_ connection: PostgresConnection, _ grant: DownloadGrantRecord, logger: Logger) async throws {
        try await connection.run("""
            UPDATE download_grants SET state = \(grant.state.rawValue), counts_for_lifetime = \(grant.countsForLifetime),
                "window" = \(try StoredJSON.encode(grant.window))::jsonb, updated_at = \(grant.updatedAt)
            WHERE application_id = \(grant.applicationId) AND grant_id = \(grant.grantId)
            """, logger: logger)
    }

    /// Ends the device's grants that hold a download (of `assetIds`, or all) as `released`: the
    /// device was wiped, killed or unregistered, or deleted the assets on command.
    static func releaseGrants(
        _ connection: PostgresConnection, applicationId: String, deviceId: String, assetIds: [String]?, at: Date, logger: Logger
    ) async throws {
        _ = try await connection.prepared(
            PreparedStatements.ReleaseGrants(
                applicationId: applicationId, deviceId: deviceId, at: at, assetIds: assetIds, holdingStates: holdingStates),
            logger: logger)
    }

    static func insert(_ connection: PostgresConnection, _ g: DownloadGrantRecord, logger: Logger) async throws {
        try await connection.run("""
            INSERT INTO download_grants (
                grant_id, application_id, user_id, device_id, asset_id, state, counts_for_lifetime, "window", granted_at, updated_at)
            VALUES (\(g.grantId), \(g.applicationId), \(g.userId), \(g.deviceId), \(g.assetId), \(g.state.rawValue),
                    \(g.countsForLifetime), \(try StoredJSON.encode(g.window))::jsonb, \(g.grantedAt), \(g.updatedAt))
            """, logger: logger)
    }

    public func setAssetPolicy(_ record: AssetPolicyRecord) async throws {
        try await rows("""
            INSERT INTO asset_policies (application_id, asset_id, policy, updated_at)
            VALUES (\(record.applicationId), \(record.assetId), \(try StoredJSON.encode(record.policy))::jsonb, \(record.updatedAt))
            ON CONFLICT (application_id, asset_id) DO UPDATE SET policy = excluded.policy, updated_at = excluded.updated_at
            """)
    }

    public func assetPolicy(applicationId: String, assetId: String) async throws -> AssetPolicyRecord? {
        try await rows("""
            SELECT \(unescaped: PostgresColumns.assetPolicy) FROM asset_policies WHERE application_id = \(applicationId) AND asset_id = \(assetId)
            """).records(AssetPolicyRecord.init).first
    }

    public func deleteAssetPolicy(applicationId: String, assetId: String) async throws -> Bool {
        try await !rows("DELETE FROM asset_policies WHERE application_id = \(applicationId) AND asset_id = \(assetId) RETURNING 1").isEmpty
    }

    public func entitlementKeys(
        applicationId: String, orCreate make: (@Sendable () -> EntitlementKeyRecord)?
    ) async throws -> [EntitlementKeyRecord] {
        let query: PostgresQuery = """
            SELECT \(unescaped: PostgresColumns.entitlementKey) FROM entitlement_keys
            WHERE application_id = \(applicationId) AND retired_at IS NULL ORDER BY row_id DESC
            """  // insertion order: the newest signs
        let keys = try await rows(query).records(EntitlementKeyRecord.init)
        guard keys.isEmpty, let make else { return keys }
        return try await transaction { [logger] connection in
            // Two nodes asked at once: the second finds the first's key under the lock.
            try await connection.lock("entitlement-keys\u{1F}\(applicationId)", logger: logger)
            let keys = try await connection.rows(query, logger: logger).records(EntitlementKeyRecord.init)
            guard keys.isEmpty else { return keys }
            let key = make()
            try await Self.insert(connection, key, logger: logger)
            return [key]
        }
    }

    public func addEntitlementKey(_ key: EntitlementKeyRecord) async throws {
        try await connection { [logger] connection in try await Self.insert(connection, key, logger: logger) }
    }

    private static func insert(_ connection: PostgresConnection, _ key: EntitlementKeyRecord, logger: Logger) async throws {
        try await connection.run("""
            INSERT INTO entitlement_keys (key_id, application_id, private_key, created_at, retired_at)
            VALUES (\(key.keyId), \(key.applicationId), \(key.privateKey), \(key.createdAt), \(key.retiredAt))
            """, logger: logger)
    }

    public func retireEntitlementKey(applicationId: String, keyId: String, at: Date) async throws -> EntitlementKeyRecord? {
        try await transaction { [logger] connection in
            guard var key = try await connection.rows("""
                SELECT \(unescaped: PostgresColumns.entitlementKey) FROM entitlement_keys
                WHERE application_id = \(applicationId) AND key_id = \(keyId) FOR UPDATE
                """, logger: logger).records(EntitlementKeyRecord.init).first
            else { return nil }
            if key.retiredAt == nil {
                key.retiredAt = at
                try await connection.run("UPDATE entitlement_keys SET retired_at = \(at) WHERE key_id = \(keyId)", logger: logger)
            }
            return key
        }
    }
}
