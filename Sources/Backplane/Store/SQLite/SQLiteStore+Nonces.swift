import Foundation
import GRDB
import BackplaneWire

/// Signed requests' nonces: each accepted once per key until it expires. Spent in memory under
/// a durable lease (`SpentNonces`); only a nonce signed at or after the lease is written, in the
/// request's own write.
extension SQLiteStore {
    public func recordSignedRequest(_ request: SignedRequestRecord) async throws -> Bool {
        do {
            guard case .durable(let lease) = try spentNonces.spend(request) else { return true }
            try await recordDurably(request, lease: lease) { _ in }
            return true
        } catch is NonceReusedError {
            return false
        }
    }

    /// `body` in a write that spends `nonce` first (`NonceReusedError` for a replay,
    /// `SignedBeforeRestartError` for a timestamp from before the restart; either changes
    /// nothing): in memory when the lease allows, else recorded in `body`'s transaction.
    func write<T: Sendable>(spending nonce: SignedRequestRecord?, _ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        guard let nonce else { return try await write(body) }
        switch try spentNonces.spend(nonce) {
        case .inMemory:
            do {
                return try await write(body)
            } catch {
                spentNonces.giveBack(nonce)
                throw error
            }
        case .durable(let lease):
            return try await recordDurably(nonce, lease: lease, body)
        }
    }

    /// Records a nonce `spend` asked to keep durably, with the lease it asked for, in `body`'s
    /// transaction. A write that fails gives the nonce back: the request changed nothing and
    /// may come again, unless it failed because the nonce is on disk already.
    private func recordDurably<T: Sendable>(
        _ nonce: SignedRequestRecord, lease: Int64, _ body: @escaping @Sendable (Database) throws -> T
    ) async throws -> T {
        do {
            let result = try await write { db in
                try Self.record(db, nonce, lease: lease)
                return try body(db)
            }
            spentNonces.leaseCommitted(lease)
            return result
        } catch is NonceReusedError {
            // On disk already: spent, whatever memory said. Not given back.
            throw NonceReusedError()
        } catch {
            spentNonces.giveBack(nonce)
            throw error
        }
    }

    /// Records `request`'s nonce and moves the lease to `lease`, inside `db`'s transaction.
    private static func record(_ db: Database, _ request: SignedRequestRecord, lease: Int64) throws {
        try db.cachedStatement(sql: "INSERT INTO nonces (key_id, nonce, expires_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING")
            .execute(arguments: [request.keyId, request.nonce, request.expiresAt.stored])
        // Loaded into memory on start, so a replay is refused there first; this is the backstop.
        guard db.changesCount == 1 else { throw NonceReusedError() }
        try db.cachedStatement(sql: """
            INSERT INTO nonce_lease (id, accepts_before) VALUES (1, ?)
            ON CONFLICT (id) DO UPDATE SET accepts_before = max(accepts_before, excluded.accepts_before)
            """).execute(arguments: [lease])
    }

    /// The lease and the durable nonces as stored: what `SpentNonces` starts from.
    static func storedNonces(_ writer: any DatabaseWriter) throws -> SpentNonces {
        try writer.read { db in
            let lease = try Int64.fetchOne(db, sql: "SELECT accepts_before FROM nonce_lease WHERE id = 1") ?? 0
            let durable = try Row.fetchAll(db, sql: "SELECT key_id, nonce, expires_at FROM nonces").map { row in
                (keyId: row["key_id"] as String, nonce: row["nonce"] as String, expiresAt: (row["expires_at"] as StoredDate).date)
            }
            return SpentNonces(lease: lease, durable: durable)
        }
    }

    /// Forgets nonces that expired before `date`, in memory and on disk; returns how many were
    /// kept in memory, where every spent nonce is.
    public func pruneNonces(expiredBefore date: Date) async throws -> Int {
        // Memory first: a write that fails must not leave it growing.
        let forgotten = spentNonces.prune(expiredBefore: date)
        try await write { db in try db.execute(sql: "DELETE FROM nonces WHERE expires_at < ?", arguments: [date.stored]) }
        return forgotten
    }

    public func nonceCount() async throws -> Int { spentNonces.count }
}
