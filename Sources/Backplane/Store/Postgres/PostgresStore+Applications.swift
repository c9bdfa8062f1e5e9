import Foundation
import PostgresNIO
import BackplaneWire

/// Applications with their settings and app keys; signed requests' nonces. Tokens: `PostgresStore+Tokens.swift`.
extension PostgresStore {
    public func createApplication(_ application: ApplicationRecord, key: AppKeyRecord) async throws {
        let settings = try StoredJSON.encode(application.settings)
        try await transaction { [logger] connection in
            try await connection.run("""
                INSERT INTO applications (id, name, settings, created_at)
                VALUES (\(application.id), \(application.name), \(settings)::jsonb, \(application.createdAt))
                """, logger: logger)
            try await Self.insert(connection, key, logger: logger)
        }
    }

    public func application(id: String) async throws -> ApplicationRecord? {
        try await recentApplications.value(id) {
            try await rows("SELECT \(unescaped: PostgresColumns.application) FROM applications WHERE id = \(id)")
                .records(ApplicationRecord.init).first
        }
    }

    public func applications() async throws -> [ApplicationRecord] {
        try await rows("SELECT \(unescaped: PostgresColumns.application) FROM applications ORDER BY created_at, id")
            .records(ApplicationRecord.init)
    }

    public func updateSettings(
        applicationId: String, _ change: @escaping @Sendable (ApplicationSettings) throws -> ApplicationSettings
    ) async throws -> ApplicationSettings? {
        defer { recentApplications.clear() }
        return try await transaction { [logger] connection in
            let rows = try await connection.rows(
                "SELECT settings::text FROM applications WHERE id = \(applicationId) FOR NO KEY UPDATE", logger: logger)
            guard let row = rows.first else { return nil }
            let settings = try change(try StoredJSON.decode(ApplicationSettings.self, try row.decode(String.self)))
            let encoded = try StoredJSON.encode(settings)
            try await connection.run("UPDATE applications SET settings = \(encoded)::jsonb WHERE id = \(applicationId)", logger: logger)
            return settings
        }
    }

    public func userIdentity(applicationId: String) async throws -> UserIdentityRecord? {
        try await rows("SELECT \(unescaped: PostgresColumns.userIdentity) FROM user_identities WHERE application_id = \(applicationId)")
            .records(UserIdentityRecord.init).first
    }

    public func setUserIdentity(_ record: UserIdentityRecord) async throws {
        try await rows("""
            INSERT INTO user_identities (application_id, required, issuer, audience, jwks, jwks_url, hs256_secret, updated_at)
            VALUES (\(record.applicationId), \(record.required), \(record.issuer), \(record.audience), \(record.jwks), \(record.jwksUrl),
                    \(record.hs256Secret), \(record.updatedAt))
            ON CONFLICT (application_id) DO UPDATE SET required = excluded.required, issuer = excluded.issuer, audience = excluded.audience,
                jwks = excluded.jwks, jwks_url = excluded.jwks_url, hs256_secret = excluded.hs256_secret, updated_at = excluded.updated_at
            """)
    }

    public func deleteUserIdentity(applicationId: String) async throws -> Bool {
        try await !rows("DELETE FROM user_identities WHERE application_id = \(applicationId) RETURNING 1").isEmpty
    }

    public func bindUserToken(applicationId: String, tokenId: String, deviceId: String, expiresAt: Date, now: Date) async throws -> String {
        try await rows("DELETE FROM user_token_uses WHERE expires_at < \(now)")
        // Bound already: the binding is read by a statement of its own, which sees one committed
        // while the insert waited. Should it have ended and gone meanwhile, the insert goes again.
        while true {
            // A binding of the same id that has ended is taken over in the same statement: a
            // delete beside the insert (a WITH) would run on its snapshot and leave it conflicting.
            let inserted = try await rows("""
                INSERT INTO user_token_uses (application_id, token_id, device_id, expires_at)
                VALUES (\(applicationId), \(tokenId), \(deviceId), \(expiresAt))
                ON CONFLICT (application_id, token_id) DO UPDATE SET device_id = excluded.device_id, expires_at = excluded.expires_at
                    WHERE user_token_uses.expires_at < \(now)
                RETURNING device_id
                """)
            if let row = inserted.first { return try row.decode(String.self) }
            let bound = try await rows(
                "SELECT device_id FROM user_token_uses WHERE application_id = \(applicationId) AND token_id = \(tokenId)")
            if let row = bound.first { return try row.decode(String.self) }
        }
    }

    public func addAppKey(_ key: AppKeyRecord) async throws {
        try await transaction { [logger] connection in try await Self.insert(connection, key, logger: logger) }
    }

    private static func insert(_ connection: PostgresConnection, _ key: AppKeyRecord, logger: Logger) async throws {
        try await connection.run("""
            INSERT INTO app_keys (key_id, application_id, secret, created_at, revoked_at)
            VALUES (\(key.keyId), \(key.applicationId), \(key.secret), \(key.createdAt), \(key.revokedAt))
            """, logger: logger)
    }

    public func appKey(id: String) async throws -> AppKeyRecord? {
        try await recentAppKeys.value(id) {
            try await rows("SELECT \(unescaped: PostgresColumns.appKey) FROM app_keys WHERE key_id = \(id)").records(AppKeyRecord.init).first
        }
    }

    public func appKeys(applicationId: String) async throws -> [AppKeyRecord] {
        try await rows("""
            SELECT \(unescaped: PostgresColumns.appKey) FROM app_keys WHERE application_id = \(applicationId) ORDER BY created_at, key_id
            """).records(AppKeyRecord.init)
    }

    public func revokeAppKey(
        applicationId: String, keyId: String, at date: Date, check: @escaping @Sendable ([AppKeyRecord]) throws -> Void
    ) async throws -> AppKeyRecord? {
        defer { recentAppKeys.clear() }
        return try await transaction { [logger] connection in
            // The application's row is the lock: two revocations cannot both pass `check` on the same keys.
            guard try await !connection.rows("SELECT 1 FROM applications WHERE id = \(applicationId) FOR NO KEY UPDATE", logger: logger).isEmpty,
                  var key = try await connection.rows(
                      "SELECT \(unescaped: PostgresColumns.appKey) FROM app_keys WHERE key_id = \(keyId) AND application_id = \(applicationId)",
                      logger: logger).records(AppKeyRecord.init).first
            else { return nil }
            if key.revokedAt != nil { return key }
            let active = try await connection.rows("""
                SELECT \(unescaped: PostgresColumns.appKey) FROM app_keys WHERE application_id = \(applicationId) AND revoked_at IS NULL
                """, logger: logger).records(AppKeyRecord.init)
            try check(active)
            key.revokedAt = date
            try await connection.run("UPDATE app_keys SET revoked_at = \(date) WHERE key_id = \(keyId)", logger: logger)
            return key
        }
    }

    // MARK: Nonces

    /// Records a signed request's nonce (in the caller's transaction, if any); false for a replay.
    /// The primary key decides: of two nodes given the same request at once, one inserts. A
    /// timestamp before the lease copied from a SQLite server (copy-data) is refused with
    /// `SignedBeforeRestartError`, as that server would have after a restart: it kept nonces in
    /// memory, so the copy holds only some of them.
    static func record(_ connection: PostgresConnection, _ request: SignedRequestRecord, logger: Logger) async throws -> Bool {
        let rows = try await connection.prepared(PreparedStatements.SpendNonces(requests: [request]), logger: logger)
        let (floor, spent) = PreparedStatements.SpendNonces.answer(rows)
        return try PreparedStatements.SpendNonces.spentNow(request, floor: floor, spent: spent.contains(NonceKey(request)))
    }

    public func pruneNonces(expiredBefore date: Date) async throws -> Int {
        try await rows("WITH gone AS (DELETE FROM nonces WHERE expires_at < \(date) RETURNING 1) SELECT COUNT(*) FROM gone")
            .first?.decode(Int.self) ?? 0
    }

    public func nonceCount() async throws -> Int {
        try await rows("SELECT COUNT(*) FROM nonces").first?.decode(Int.self) ?? 0
    }
}
