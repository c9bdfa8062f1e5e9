import Foundation
import GRDB
import BackplaneWire

/// Signed requests' nonces: each accepted once per key until it expires.
extension SQLiteStore {
    public func recordSignedRequest(_ request: SignedRequestRecord) async throws -> Bool {
        try await write { db in try Self.record(db, request) }
    }

    /// Records a signed request's nonce inside `db`'s transaction; false for a replay.
    static func record(_ db: Database, _ request: SignedRequestRecord) throws -> Bool {
        try db.cachedStatement(sql: "INSERT INTO nonces (key_id, nonce, expires_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING")
            .execute(arguments: [request.keyId, request.nonce, request.expiresAt])
        return db.changesCount == 1
    }

    public func pruneNonces(expiredBefore date: Date) async throws -> Int {
        try await write { db in
            try db.execute(sql: "DELETE FROM nonces WHERE expires_at < ?", arguments: [date])
            return db.changesCount
        }
    }

    public func nonceCount() async throws -> Int {
        try await read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM nonces") ?? 0 }
    }
}
