import Foundation
import GRDB
import BackplaneWire

/// Applications with their settings and app keys. Tokens: `SQLiteStore+Tokens.swift`.
extension SQLiteStore {
    public func createApplication(_ application: ApplicationRecord, key: AppKeyRecord) async throws {
        try await write { db in
            var application = application, key = key
            try application.insert(db)
            try key.insert(db)
        }
    }

    public func application(id: String) async throws -> ApplicationRecord? {
        try await recentApplications.value(id) {
            try await pointRead { db in try Self.fetchOne(ApplicationRecord.self, db, sql: "SELECT * FROM applications WHERE id = ?", [id]) }
        }
    }

    public func applications() async throws -> [ApplicationRecord] {
        try await read { db in try ApplicationRecord.order(\.createdAt).fetchAll(db) }
    }

    public func updateSettings(
        applicationId: String, _ change: @escaping @Sendable (ApplicationSettings) throws -> ApplicationSettings
    ) async throws -> ApplicationSettings? {
        defer { recentApplications.clear() }
        return try await write { db in
            guard var application = try ApplicationRecord.fetchOne(db, key: applicationId) else { return nil }
            application.settings = try change(application.settings)
            try application.update(db)
            return application.settings
        }
    }

    public func userIdentity(applicationId: String) async throws -> UserIdentityRecord? {
        try await read { db in try UserIdentityRecord.fetchOne(db, key: applicationId) }
    }

    public func setUserIdentity(_ record: UserIdentityRecord) async throws {
        try await write { db in
            var record = record
            try record.upsert(db)
        }
    }

    public func deleteUserIdentity(applicationId: String) async throws -> Bool {
        try await write { db in try UserIdentityRecord.deleteOne(db, key: applicationId) }
    }

    public func bindUserToken(applicationId: String, tokenId: String, deviceId: String, expiresAt: Date, now: Date) async throws -> String {
        try await write { db in
            try db.execute(sql: "DELETE FROM user_token_uses WHERE expires_at < ?", arguments: [now])
            // The same statement as PostgreSQL's: an ended binding of the id is taken over.
            try db.execute(
                sql: """
                    INSERT INTO user_token_uses (application_id, token_id, device_id, expires_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (application_id, token_id) DO UPDATE SET device_id = excluded.device_id, expires_at = excluded.expires_at
                        WHERE user_token_uses.expires_at < ?
                    """,
                arguments: [applicationId, tokenId, deviceId, expiresAt, now])
            return try String.fetchOne(
                db, sql: "SELECT device_id FROM user_token_uses WHERE application_id = ? AND token_id = ?", arguments: [applicationId, tokenId])
                ?? deviceId
        }
    }

    public func addAppKey(_ key: AppKeyRecord) async throws {
        try await write { db in
            var key = key
            try key.insert(db)
        }
    }

    public func appKey(id: String) async throws -> AppKeyRecord? {
        try await recentAppKeys.value(id) {
            try await pointRead { db in try Self.fetchOne(AppKeyRecord.self, db, sql: "SELECT * FROM app_keys WHERE key_id = ?", [id]) }
        }
    }

    public func appKeys(applicationId: String) async throws -> [AppKeyRecord] {
        try await read { db in
            try AppKeyRecord.filter { $0.applicationId == applicationId }.order(\.createdAt).fetchAll(db)
        }
    }

    public func revokeAppKey(
        applicationId: String, keyId: String, at date: Date, check: @escaping @Sendable ([AppKeyRecord]) throws -> Void
    ) async throws -> AppKeyRecord? {
        defer { recentAppKeys.clear() }
        return try await write { db in
            guard var key = try AppKeyRecord.fetchOne(db, key: keyId), key.applicationId == applicationId else { return nil }
            if key.revokedAt != nil { return key }
            let active = try AppKeyRecord
                .filter { $0.applicationId == applicationId && $0.revokedAt == nil }
                .fetchAll(db)
            try check(active)
            key.revokedAt = date
            try key.update(db)
            return key
        }
    }
}
