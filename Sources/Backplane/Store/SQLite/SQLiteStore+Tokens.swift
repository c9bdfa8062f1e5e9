import Foundation
import GRDB
import BackplaneWire

/// Bearer tokens, and when app keys and tokens were last used.
extension SQLiteStore {
    public func createToken(_ token: TokenRecord) async throws {
        try await write { db in
            var token = token
            try token.insert(db)
        }
    }

    public func token(hash: String) async throws -> TokenRecord? {
        try await read { db in try TokenRecord.filter { $0.tokenHash == hash }.fetchOne(db) }
    }

    public func tokens(applicationId: String) async throws -> [TokenRecord] {
        try await read { db in
            try TokenRecord.fetchAll(db, sql: "SELECT * FROM tokens WHERE application_id = ? ORDER BY created_at, id", arguments: [applicationId])
        }
    }

    public func revokeToken(applicationId: String, tokenId: String, at date: Date) async throws -> TokenRecord? {
        try await write { db in
            try db.execute(
                sql: "UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? AND application_id = ?",
                arguments: [date, tokenId, applicationId])
            return try Self.fetchOne(TokenRecord.self, db, sql: "SELECT * FROM tokens WHERE id = ? AND application_id = ?", [tokenId, applicationId])
        }
    }

    public func recordCredentialUse(keys: [String: Date], tokens: [String: Date]) async throws {
        guard !keys.isEmpty || !tokens.isEmpty else { return }
        defer { recentAppKeys.clear() }
        try await write { db in
            // MAX with one NULL argument is NULL in SQLite: COALESCE keeps the first use.
            for (keyId, time) in keys {
                try db.execute(
                    sql: "UPDATE app_keys SET last_used_at = MAX(COALESCE(last_used_at, ?), ?) WHERE key_id = ?", arguments: [time, time, keyId])
            }
            for (tokenId, time) in tokens {
                try db.execute(
                    sql: "UPDATE tokens SET last_used_at = MAX(COALESCE(last_used_at, ?), ?) WHERE id = ?", arguments: [time, time, tokenId])
            }
        }
    }
}
