import Foundation
import PostgresNIO
import BackplaneWire

/// Bearer tokens, and when app keys and tokens were last used.
extension PostgresStore {
    public func createToken(_ token: TokenRecord) async throws {
        try await rows("""
            INSERT INTO tokens (id, application_id, scope, token_hash, name, created_at, revoked_at, expires_at)
            VALUES (\(token.id), \(token.applicationId), \(token.scope.rawValue), \(token.tokenHash), \(token.name), \(token.createdAt),
                    \(token.revokedAt), \(token.expiresAt))
            """)
    }

    public func token(hash: String) async throws -> TokenRecord? {
        try await rows("SELECT \(unescaped: PostgresColumns.token) FROM tokens WHERE token_hash = \(hash)").records(TokenRecord.init).first
    }

    public func tokens(applicationId: String) async throws -> [TokenRecord] {
        try await rows("""
            SELECT \(unescaped: PostgresColumns.token) FROM tokens WHERE application_id = \(applicationId) ORDER BY created_at, id
            """).records(TokenRecord.init)
    }

    public func revokeToken(applicationId: String, tokenId: String, at date: Date) async throws -> TokenRecord? {
        // One statement: the revocation time is set once, whichever node revokes first.
        try await rows("""
            UPDATE tokens SET revoked_at = COALESCE(revoked_at, \(date))
            WHERE id = \(tokenId) AND application_id = \(applicationId)
            RETURNING \(unescaped: PostgresColumns.token)
            """).records(TokenRecord.init).first
    }

    public func recordCredentialUse(keys: [String: Date], tokens: [String: Date]) async throws {
        guard !keys.isEmpty || !tokens.isEmpty else { return }
        defer { recentAppKeys.clear() }
        try await transaction { [logger] connection in
            // GREATEST ignores NULL: the first use is written, an older time never replaces a newer one.
            for (keyId, time) in keys.sorted(by: { $0.key < $1.key }) {
                try await connection.run(
                    "UPDATE app_keys SET last_used_at = GREATEST(last_used_at, \(time)) WHERE key_id = \(keyId)", logger: logger)
            }
            for (tokenId, time) in tokens.sorted(by: { $0.key < $1.key }) {
                try await connection.run(
                    "UPDATE tokens SET last_used_at = GREATEST(last_used_at, \(time)) WHERE id = \(tokenId)", logger: logger)
            }
        }
    }
}
