import Foundation
import PostgresNIO
import BackplaneWire

/// Assets' content keys, sealed.
extension PostgresStore {
    private static let contentKeyColumns = "application_id, asset_id, kid, sealed_key, sealed_with, created_at"

    public func setContentKeys(
        applicationId: String, assetId: String, keys: [ContentKeyRecord], replacing: Bool, limit: Int
    ) async throws -> ContentKeyChange {
        try await transaction { [logger] connection in
            // Two admins giving one key id to two assets at once: the second waits, then finds it taken.
            try await connection.lock("content-keys\u{1F}\(applicationId)", logger: logger)
            let kids = keys.map(\.kid)
            let owners = try await connection.rows("""
                SELECT kid, asset_id FROM content_keys WHERE application_id = \(applicationId) AND kid = ANY(\(kids))
                """, logger: logger).map { try $0.decode((String, String).self) }
            if let (kid, owner) = owners.first(where: { $0.1 != assetId }) { return .kidTaken(kid: kid, assetId: owner) }
            if replacing {
                try await connection.run(
                    "DELETE FROM content_keys WHERE application_id = \(applicationId) AND asset_id = \(assetId)", logger: logger)
            } else {
                let kept = try await connection.rows("""
                    SELECT count(*) FROM content_keys
                    WHERE application_id = \(applicationId) AND asset_id = \(assetId) AND NOT (kid = ANY(\(kids)))
                    """, logger: logger).first?.decode(Int.self) ?? 0
                if kept + keys.count > limit { return .tooMany(held: kept) }
            }
            for key in keys {
                try await connection.run("""
                    INSERT INTO content_keys (application_id, asset_id, kid, sealed_key, sealed_with, created_at)
                    VALUES (\(key.applicationId), \(key.assetId), \(key.kid), \(key.sealedKey), \(key.sealedWith), \(key.createdAt))
                    ON CONFLICT (application_id, kid) DO UPDATE SET sealed_key = excluded.sealed_key,
                        sealed_with = excluded.sealed_with, created_at = excluded.created_at
                    """, logger: logger)
            }
            return .set
        }
    }

    public func contentKeys(applicationId: String, assetId: String) async throws -> [ContentKeyRecord] {
        try await rows("""
            SELECT \(unescaped: Self.contentKeyColumns) FROM content_keys
            WHERE application_id = \(applicationId) AND asset_id = \(assetId) ORDER BY created_at, kid
            """).records(ContentKeyRecord.init)
    }
}
