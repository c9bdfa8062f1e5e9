import Foundation
import GRDB
import BackplaneWire

/// Assets' content keys, sealed.
extension SQLiteStore {
    public func setContentKeys(
        applicationId: String, assetId: String, keys: [ContentKeyRecord], replacing: Bool, limit: Int
    ) async throws -> ContentKeyChange {
        try await write { db in
            for key in keys {
                if let owner = try String.fetchOne(
                    db, sql: "SELECT asset_id FROM content_keys WHERE application_id = ? AND kid = ?", arguments: [applicationId, key.kid]),
                    owner != assetId
                {
                    return .kidTaken(kid: key.kid, assetId: owner)
                }
            }
            let mine = ContentKeyRecord.filter(Column("application_id") == applicationId && Column("asset_id") == assetId)
            if !replacing {
                let kids = Set(keys.map(\.kid))
                let kept = try mine.fetchAll(db).filter { !kids.contains($0.kid) }.count
                if kept + keys.count > limit { return .tooMany(held: kept) }
            } else {
                try mine.deleteAll(db)
            }
            for key in keys {
                // (Not GRDB's upsert: it returns the rowid, which a WITHOUT ROWID table has not.)
                try db.execute(
                    sql: """
                        INSERT INTO content_keys (application_id, asset_id, kid, sealed_key, sealed_with, created_at) VALUES (?, ?, ?, ?, ?, ?)
                        ON CONFLICT (application_id, kid) DO UPDATE SET sealed_key = excluded.sealed_key,
                            sealed_with = excluded.sealed_with, created_at = excluded.created_at
                        """,
                    arguments: [key.applicationId, key.assetId, key.kid, key.sealedKey, key.sealedWith, key.createdAt.stored])
            }
            return .set
        }
    }

    public func contentKeys(applicationId: String, assetId: String) async throws -> [ContentKeyRecord] {
        try await read { db in
            try ContentKeyRecord.filter(Column("application_id") == applicationId && Column("asset_id") == assetId)
                .order(Column("created_at"), Column("kid")).fetchAll(db)
        }
    }
}
